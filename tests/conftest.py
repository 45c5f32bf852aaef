"""Test servers and the fixtures every folder shares (factories: tests/factories.py).

One PostgreSQL (embedded, or the one DATABASE_URL names) with a fresh database per run, built by
the real migrations; one Redis (embedded, or REDIS_URL); one real SMTP server (aiosmtpd) on
loopback. Every test provisions its own organisations and sub-accounts: isolation by construction.

Behind PgBouncer (CI's second pass): DATABASE_URL names PgBouncer and
SWITCHBOARD_DIRECT_DATABASE_URL the PostgreSQL server behind it. The app, the worker's pool and
the tests' own queries go through PgBouncer; creating and dropping the test database, the
migrations, LISTEN and session advisory locks use the direct URL, as in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from cryptography.fernet import Fernet

from tenancy.embedded import free_port, start_postgres, start_redis
from tenancy.settings import get_settings
from tests.factories import Agency, Tenant, make_agency, make_priced_tenant, make_tenant
from tests.helpers import Live, live_system, restore_environment, voice_process
from tests.receiver import Receiver
from voice.fake_vendors import FakeVendors

# A random pepper and secrets key for the run (unless set), as `switchboard dev` makes them: serve,
# worker and migrate refuse to start without them, and every process a test starts inherits them.
os.environ.setdefault("SWITCHBOARD_KEY_PEPPER", secrets.token_urlsafe(32))
os.environ.setdefault("SWITCHBOARD_SECRETS_KEY", Fernet.generate_key().decode())

# --- servers ----------------------------------------------------------------------------------


@dataclass
class Servers:
    database_url: str
    admin_url: str
    database: str
    redis_url: str
    # The test database on PostgreSQL itself: `database_url` unless that is PgBouncer.
    direct_url: str


def _with_database(url: str, database: str) -> str:
    base, _, query = url.partition("?")
    scheme, rest = base.split("://", 1)
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{database}" + (f"?{query}" if query else "")


def _own_redis_database(url: str) -> str:
    """Under pytest-xdist every worker process has a database of its own (one each, as for
    PostgreSQL), so one worker's arq jobs, rate limits and flushes never reach another's: the
    given Redis, database 1 + the worker's number."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{1 + int(worker[2:])}"))


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    tmp = Path(tempfile.mkdtemp(prefix="switchboard-test-"))
    embedded_pg = embedded_redis = None
    admin_url = os.environ.get("DATABASE_URL")
    direct_admin_url = os.environ.get("SWITCHBOARD_DIRECT_DATABASE_URL") if admin_url else None
    if not admin_url:
        embedded_pg = start_postgres(tmp, fast_unsafe=True)
        admin_url = embedded_pg.url
    direct_admin_url = direct_admin_url or admin_url
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        redis_url = _own_redis_database(redis_url)
    else:
        embedded_redis = start_redis(tmp, port=free_port())
        redis_url = embedded_redis.url
    database = f"sbtest_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        conn = await asyncpg.connect(direct_admin_url)
        await conn.execute(f'CREATE DATABASE "{database}"')
        await conn.close()

    asyncio.run(create())
    direct_url = _with_database(direct_admin_url, database)
    # The direct URL must name the test database too: the app, workers and `switchboard`
    # processes started by tests (which inherit this environment) read it.
    saved_direct = os.environ.pop("SWITCHBOARD_DIRECT_DATABASE_URL", None)
    if direct_admin_url != admin_url:
        os.environ["SWITCHBOARD_DIRECT_DATABASE_URL"] = direct_url
    get_settings.cache_clear()
    try:
        yield Servers(
            _with_database(admin_url, database), admin_url, database, redis_url, direct_url
        )
    finally:
        os.environ.pop("SWITCHBOARD_DIRECT_DATABASE_URL", None)
        if saved_direct is not None:
            os.environ["SWITCHBOARD_DIRECT_DATABASE_URL"] = saved_direct
        get_settings.cache_clear()

        async def drop() -> None:
            conn = await asyncpg.connect(direct_admin_url)
            await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            await conn.close()

        try:
            asyncio.run(drop())
        finally:
            if embedded_redis is not None:
                embedded_redis.stop()
            if embedded_pg is not None:
                embedded_pg.stop()
            shutil.rmtree(tmp, ignore_errors=True)


# --- S3 ---------------------------------------------------------------------------------------


@dataclass
class S3Server:
    endpoint_url: str
    region: str = "us-east-1"

    def client(self) -> Any:
        import boto3

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region
        )

    def new_bucket(self) -> str:
        name = f"recordings-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A real S3 server on loopback (moto in server mode), with test credentials in the
    standard AWS variables, as the S3 recordings store reads them."""
    from moto.server import ThreadedMotoServer

    saved = {key: os.environ.get(key) for key in S3_CREDENTIALS}
    os.environ.update(S3_CREDENTIALS)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- SMTP -------------------------------------------------------------------------------------


@dataclass
class Mailbox:
    host: str
    port: int
    messages: list[tuple[str, list[str], Message]] = field(default_factory=list)

    def to(self, address: str) -> list[Message]:
        return [
            msg for _, rcpt, msg in self.messages if address.lower() in [r.lower() for r in rcpt]
        ]


class _Handler:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.box.messages.append(
            (
                envelope.mail_from,
                list(envelope.rcpt_tos),
                message_from_bytes(envelope.original_content),
            )
        )
        return "250 Message accepted for delivery"


@pytest.fixture(scope="session")
def mailbox() -> Iterator[Mailbox]:
    from aiosmtpd.controller import Controller

    box = Mailbox("127.0.0.1", free_port())
    controller = Controller(_Handler(box), hostname=box.host, port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


# --- settings, migrations, app ----------------------------------------------------------------


@pytest.fixture(scope="session")
def environment(servers: Servers, mailbox: Mailbox) -> Iterator[None]:
    values = {
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
        "SMTP_HOST": mailbox.host,
        "SMTP_PORT": str(mailbox.port),
        "SWITCHBOARD_RATE_LIMIT_REQUESTS": "100000",
        "SWITCHBOARD_WEBHOOK_RETRY_SCALE": "0.001",
        "SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS": "true",
        # Tests revoke and suspend keys and expect the next request to see it.
        "SWITCHBOARD_AUTH_CACHE_SECONDS": "0",
        "SWITCHBOARD_VALIDATE_RESPONSES": "true",
    }
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    get_settings.cache_clear()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()


@pytest.fixture(scope="session")
def migrated(servers: Servers, environment: None) -> str:
    from tenancy.migrate import upgrade_control

    # Migrations connect to PostgreSQL directly, as `switchboard migrate` does.
    upgrade_control(servers.direct_url)
    return servers.database_url


@pytest.fixture(scope="session")
async def pool(migrated: str) -> AsyncIterator[asyncpg.Pool]:
    from tenancy.db import create_pool

    db_pool = await create_pool(migrated, min_size=1, max_size=10)
    yield db_pool
    await db_pool.close()


@pytest.fixture(scope="session")
async def app(migrated: str) -> AsyncIterator[Any]:
    from cli.wiring import build_app as create_app

    application = create_app()
    async with application.test_app() as test_app:
        yield test_app


@pytest.fixture(scope="session")
def client(app: Any) -> Any:
    return app.test_client()


@pytest.fixture
def run_worker(migrated: str, servers: Servers, voice_runtime: VoiceRuntime) -> Any:
    """Run the real arq worker in burst mode (until the queue is empty) against the test Redis."""
    from arq.worker import Worker

    from cli.wiring import JOBS
    from jobs.worker import worker_settings

    async def run(jobs: Any = JOBS, **overrides: Any) -> Any:
        options: dict[str, Any] = {"burst": True, "poll_delay": 0.05, "handle_signals": False}
        options.update(overrides)
        worker = Worker(**worker_settings(migrated, servers.redis_url, jobs, **options))
        try:
            await worker.async_run()
        finally:
            await worker.close()
        return worker

    return run


@contextlib.asynccontextmanager
async def running_worker(database_url: str, redis_url: str) -> AsyncIterator[Any]:
    """The real arq worker (not burst) in this process while the block runs, stopped gracefully:
    no new jobs, running ones given a few seconds, then closed."""
    from arq.worker import Worker

    from cli.wiring import worker_settings

    running = Worker(
        **worker_settings(
            database_url, redis_url, burst=False, poll_delay=0.05, handle_signals=False
        )
    )
    task = asyncio.create_task(running.async_run())
    try:
        yield running
    finally:
        running.allow_pick_jobs = False
        for _ in range(200):
            if all(t.done() for t in running.tasks.values()):
                break
            await asyncio.sleep(0.05)
        with contextlib.suppress(asyncio.CancelledError):
            await running.close()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture(autouse=True)
async def _drain_background_work(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """After each test, forget the background work it left queued (a delivery to a receiver
    that is gone, a deferred retry): the next test's burst worker must not wait for it. The
    numbers its sub-accounts held are freed too, as if they had been purged, so that the next
    test may hold the same number (numbers are unique platform-wide, CONTRACT 9)."""
    yield
    if "migrated" not in request.fixturenames:
        return
    servers: Servers = request.getfixturevalue("servers")
    conn = await asyncpg.connect(servers.database_url)
    try:
        await conn.execute("DELETE FROM control.due_work")
        await conn.execute("DELETE FROM control.phone_number_directory")
    finally:
        await conn.close()
    import redis.asyncio as aioredis

    client = aioredis.from_url(servers.redis_url)
    try:
        keys = [key async for key in client.scan_iter("arq:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


# --- shared fixtures: the `x` / `x_second` pairs (another organisation's sub-account) ---------


@pytest.fixture
async def agency(pool: asyncpg.Pool) -> Agency:
    return await make_agency(pool)


@pytest.fixture
async def agency_second(pool: asyncpg.Pool) -> Agency:
    return await make_agency(pool)


@pytest.fixture
async def tenant(client: Any, agency: Agency) -> Tenant:
    return await make_tenant(client, agency)


@pytest.fixture
async def tenant_second(client: Any, agency_second: Agency) -> Tenant:
    """A sub-account of another organisation: its ids must behave as missing to `tenant`."""
    return await make_tenant(client, agency_second)


@pytest.fixture
async def tenant_priced(client: Any, agency: Agency) -> Tenant:
    """A sub-account on a plan that rebills email and SMS (EMAIL_PRICE, SMS_PRICE)."""
    return await make_priced_tenant(client, agency)


# --- shared fixtures: a running worker, a webhook receiver, settings and names ---------------


@dataclass
class VoiceRuntime:
    url: str
    log: Path
    vendors: FakeVendors


@pytest.fixture(scope="session")
async def fake_vendors() -> AsyncIterator[FakeVendors]:
    """The fake LLM and speech vendors (voice/fake_vendors), in this process for the session."""
    vendors = FakeVendors()
    await vendors.start()
    yield vendors
    await vendors.stop()


@pytest.fixture(scope="session")
def voice_runtime(
    migrated: str, fake_vendors: FakeVendors, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VoiceRuntime]:
    """`switchboard voice` as a subprocess, its vendors the fakes; every worker and carrier this
    session starts reaches it through SWITCHBOARD_VOICE_URL."""
    folder = tmp_path_factory.mktemp("voice")
    port = free_port()
    values = {**fake_vendors.env, "SWITCHBOARD_VOICE_URL": f"ws://127.0.0.1:{port}"}
    log = folder / "voice.log"
    saved = {key: os.environ.get(key) for key in values}
    with voice_process(port, values, log):
        os.environ.update(values)
        get_settings.cache_clear()
        try:
            yield VoiceRuntime(values["SWITCHBOARD_VOICE_URL"], log, fake_vendors)
        finally:
            restore_environment(saved)


@pytest.fixture
def vendors(voice_runtime: VoiceRuntime) -> Iterator[FakeVendors]:
    """The fake vendors, their requests and settings forgotten before and after this test."""
    voice_runtime.vendors.reset()
    yield voice_runtime.vendors
    voice_runtime.vendors.reset()


@pytest.fixture
async def worker(
    migrated: str, servers: Servers, voice_runtime: VoiceRuntime
) -> AsyncIterator[Any]:
    """The real arq worker (not burst), running in this process until the test ends; the calls
    it places reach the voice runtime."""
    async with running_worker(migrated, servers.redis_url) as running:
        yield running


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A scripted webhook receiver on loopback (tests/receiver.py; contacts and calls use
    their own kinds, named `receiver` too, from their conftest files)."""
    server = await Receiver().start()
    yield server
    await server.stop()


@pytest.fixture
def worker_env() -> Iterator[Callable[..., None]]:
    """Override environment settings for workers started in this test; restored afterwards."""
    saved: dict[str, str | None] = {}

    def apply(**values: str) -> None:
        for key, value in values.items():
            saved.setdefault(key, os.environ.get(key))
            os.environ[key] = value
        get_settings.cache_clear()

    yield apply
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    get_settings.cache_clear()


# Names under this zone are answered by the `dns` fixture (at the socket level, below our code).
FAKE_ZONE = ".switchboard.test"


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], None]:
    """`dns(name, address)` makes `name` resolve to `address` from now on; any other name
    under FAKE_ZONE does not resolve (at once, whatever the machine's DNS)."""
    records: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.endswith(FAKE_ZONE):
            if name not in records:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return real(records[name], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return records.__setitem__


@pytest.fixture
def live(servers: Servers, mailbox: Mailbox, migrated: str, tmp_path: Path) -> Iterator[Live]:
    """`switchboard serve` as a subprocess (no worker), its output kept."""
    with live_system(servers, mailbox, tmp_path, with_worker=False) as system:
        yield system
