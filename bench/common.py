"""Shared set-up for benchmarks: servers (embedded unless the URLs are set) and a fresh database."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx

from api.agents.sample import create_agent_body
from tenancy.embedded import free_port, start_postgres, start_redis


@contextmanager
def bench_servers() -> Iterator[tuple[str, str, str]]:
    """(database_url of a fresh database, redis_url, admin_url)."""
    tmp = Path(tempfile.mkdtemp(prefix="switchboard-bench-"))
    bench_settings(tmp)
    pg = cache = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        pg = start_postgres(tmp)
        admin = pg.url
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        cache = start_redis(tmp, port=free_port())
        redis_url = cache.url
    name = f"sbbench_{uuid.uuid4().hex[:10]}"

    async def sql(statement: str) -> None:
        conn = await asyncpg.connect(admin)
        await conn.execute(statement)
        await conn.close()

    asyncio.run(sql(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.rsplit("/", 1)[0] + f"/{name}", redis_url, admin
    finally:
        asyncio.run(sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        if cache:
            cache.stop()
        if pg:
            pg.stop()


def bench_settings(folder: Path) -> None:
    """serve, worker and migrate refuse to start without a pepper and a secrets key: random
    ones, as `switchboard dev` makes them (kept in `folder`), unless the environment sets them."""
    from tenancy.secrets_ops import ensure_dev_secrets

    ensure_dev_secrets(folder)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values),
    }


@contextmanager
def serve(env: dict[str, str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    # The server's log goes to a file: a pipe nobody reads would fill and stall the server.
    log = tempfile.NamedTemporaryFile(prefix="switchboard-bench-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start; see {log.name}")
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def write_section(title: str, body: str) -> None:
    """Replace (or append) one `## title` section of bench/RESULTS.md."""
    path = Path(__file__).resolve().parent / "RESULTS.md"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    heading = f"## {title}\n"
    if heading in text:
        start = text.index(heading)
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + heading + body.rstrip() + "\n" + (text[end:] if end != -1 else "")
    else:
        text = text.rstrip() + "\n\n" + heading + body.rstrip() + "\n"
    path.write_text(text)


def agent_body(sub_account_id: object, organisation: str, **fields: object) -> dict[str, object]:
    """The create-agent body the benchmarks start from (no webhook, no recording, the sandbox
    defaults), with `fields` on top."""
    return create_agent_body(organisation, sub_account_id, **{"name": "Bench agent", **fields})
