"""Servers of the fault tests' own: each test module gets its own embedded PostgreSQL, Redis and
SMTP server, and runs `switchboard serve` / `switchboard worker` as real processes against them,
so stopping one never touches the session's shared servers (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tenancy.embedded import (
    EmbeddedPostgres,
    EmbeddedRedis,
    free_port,
    start_postgres,
    start_redis,
)
from tests.conftest import Mailbox, _Handler

SWITCHBOARD = [sys.executable, "-m", "cli"]
BASE = "/webhooks/inbound"


class Smtp:
    """A real SMTP server (aiosmtpd) on a fixed loopback port that can be stopped and started."""

    def __init__(self) -> None:
        self.box = Mailbox("127.0.0.1", free_port())
        self.controller: Any = None

    def start(self) -> None:
        from aiosmtpd.controller import Controller

        self.controller = Controller(_Handler(self.box), hostname=self.box.host, port=self.box.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@dataclass
class Stack:
    folder: Path
    postgres: EmbeddedPostgres
    redis: EmbeddedRedis
    smtp: Smtp
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def database_url(self) -> str:
        return self.postgres.url

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.redis.url,
            "SWITCHBOARD_DIRECT_DATABASE_URL": self.postgres.url,
            "SMTP_HOST": self.smtp.box.host,
            "SMTP_PORT": str(self.smtp.box.port),
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "100000",
            "SWITCHBOARD_WEBHOOK_RETRY_SCALE": "0.001",
            "SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS": "true",
            "SWITCHBOARD_AUTH_CACHE_SECONDS": "0",
            "SWITCHBOARD_LOG_FORMAT": "text",
            **extra,
        }

    # --- servers we stop and start ---

    def stop_redis(self) -> None:
        self.redis.stop()

    def start_redis(self) -> None:
        self.redis = start_redis(self.folder, port=self.redis.port)

    def stop_postgres(self) -> None:
        self.postgres.stop()

    def start_postgres(self) -> None:
        self.postgres = start_postgres(self.folder, fast_unsafe=True, port=self.postgres.port)

    # --- our processes ---

    def spawn(self, *command: str, **extra: str) -> subprocess.Popen[bytes]:
        log = (self.folder / f"{command[0]}-{uuid.uuid4().hex[:6]}.log").open("wb")
        process = subprocess.Popen(
            [*SWITCHBOARD, *command],
            env=self.env(**extra),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        process.log_path = log.name  # type: ignore[attr-defined]
        self.processes.append(process)
        return process

    def serve(self, **extra: str) -> Api:
        port = free_port()
        process = self.spawn("serve", "--port", str(port), **extra)
        api = Api(f"http://127.0.0.1:{port}", process)
        api.wait_healthy()
        return api

    def worker(self, **extra: str) -> subprocess.Popen[bytes]:
        return self.spawn("worker", **extra)

    def stop_processes(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
        self.processes.clear()

    def create_organisation(self) -> str:
        done = subprocess.run(
            [
                *SWITCHBOARD,
                "create-organisation",
                "--name",
                f"Faults {uuid.uuid4().hex[:6]}",
                "--plan-type",
                "white_label",
                "--max-sub-accounts",
                "50",
            ],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["agency_api_key"])


@dataclass
class Api:
    url: str
    process: subprocess.Popen[bytes]

    def wait_healthy(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("the API exited; see " + self.process.log_path)  # type: ignore[attr-defined]
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("the API did not become healthy")

    def client(self, key: str | None = None) -> httpx.AsyncClient:
        headers = {"x-api-key": key} if key else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)


@dataclass
class SubAccount:
    id: str
    key: str
    agency_key: str


async def make_sub_account(api: Api, agency_key: str) -> SubAccount:
    async with api.client(agency_key) as http:
        created = await http.post(
            "/functions/v1/create-subaccount-webhook",
            json={
                "email": f"owner-{uuid.uuid4().hex[:10]}@example.com",
                "name": f"Faults {uuid.uuid4().hex[:6]}",
            },
        )
        assert created.status_code == 201, created.text
        sub_account_id = created.json()["sub_account_id"]
        issued = await http.post(f"/functions/v1/agency/sub-accounts/{sub_account_id}/api-keys")
        assert issued.status_code == 201, issued.text
    return SubAccount(sub_account_id, issued.json()["api_key"], agency_key)


async def eventually(check: Any, seconds: float = 90, every: float = 0.2) -> Any:
    """Poll `check()` until it returns something truthy (a generous bound, not a timing)."""
    async with asyncio.timeout(seconds):
        while True:
            value = await check()
            if value:
                return value
            await asyncio.sleep(every)


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, (response.status_code, response.text)
    body = response.json()
    assert body["status"] == "error", body
    assert body["error"]["code"] == "service_unavailable", body


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    from tenancy.migrate import upgrade_control

    folder = Path(tempfile.mkdtemp(prefix="switchboard-faults-"))
    postgres = start_postgres(folder, fast_unsafe=True)
    redis = None
    smtp = Smtp()
    try:
        redis = start_redis(folder, port=free_port())
        smtp.start()
        upgrade_control(postgres.url)
        running = Stack(folder, postgres, redis, smtp)
        try:
            yield running
        finally:
            running.stop_processes()
            redis = running.redis
            postgres = running.postgres
    finally:
        smtp.stop()
        if redis is not None:
            redis.stop()
        postgres.stop()
        if not os.environ.get("FAULTS_KEEP_FILES"):
            shutil.rmtree(folder, ignore_errors=True)
