"""Helpers shared by the hardening tests: a snapshot of everything a sub-account holds, and a
live system (`switchboard serve` and `switchboard worker` as subprocesses)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tenancy.db import tenant_transaction
from tenancy.embedded import free_port
from tests.voice.conftest import worker  # noqa: F401  (the telephony jobs need it)


async def snapshot(pool: asyncpg.Pool, tenant: Any) -> dict[str, list[str]]:
    """Every row of every tenant table of `tenant`, and its control rows, as text: two equal
    snapshots mean nothing of the sub-account changed."""
    import tenancy.tables  # noqa: F401  (registers every table)
    from tenancy.tables.base import tenant_metadata

    state: dict[str, list[str]] = {}
    async with tenant_transaction(pool, tenant.schema) as conn:
        for table in tenant_metadata.sorted_tables:
            rows = await conn.fetch(f'SELECT * FROM "{table.name}"')
            state[table.name] = sorted(repr(sorted(dict(row).items())) for row in rows)
    for name, column in (("sub_accounts", "id"), ("api_keys", "sub_account_id"),
                         ("invitations", "sub_account_id"), ("memberships", "sub_account_id")):
        rows = await pool.fetch(f"SELECT * FROM control.{name} WHERE {column} = $1", tenant.id)
        state[f"control.{name}"] = sorted(repr(sorted(dict(row).items())) for row in rows)
    return state



# --- a live system: `switchboard serve` and `switchboard worker` as subprocesses --------------

@dataclass
class Live:
    base_url: str
    logs: list[Path]

    def output(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in self.logs)


@contextlib.contextmanager
def live_system(servers: Any, mailbox: Any, folder: Path, *, with_worker: bool = True,
                **extra_env: str) -> Iterator[Live]:
    """The API (and the worker) as the production commands run them, output kept in files."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis_url,
           "SMTP_HOST": mailbox.host, "SMTP_PORT": str(mailbox.port),
           "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000", **extra_env}
    commands = {"serve": ["serve", "--port", str(port)]}
    if with_worker:
        commands["worker"] = ["worker"]
    processes, logs = [], []
    for name, arguments in commands.items():
        out, err = folder / f"{name}.stdout", folder / f"{name}.stderr"
        logs += [out, err]
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "cli", *arguments], env=env, stdin=subprocess.DEVNULL,
            stdout=out.open("wb"), stderr=err.open("wb")))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            assert processes[0].poll() is None and time.monotonic() < deadline, \
                "server did not start:\n" + (folder / "serve.stderr").read_text()
            time.sleep(0.2)
        yield Live(base, logs)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def live(servers: Any, mailbox: Any, migrated: str, tmp_path: Path) -> Iterator[Live]:
    with live_system(servers, mailbox, tmp_path, with_worker=False) as system:
        yield system
