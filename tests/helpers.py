"""Helpers shared by the tests: reading an error answer, looking into a tenant's schema, the
CLI and a live system as an operator runs them. Factories are in tests/factories.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from email.message import Message
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tenancy.clock import utcnow
from tenancy.db import set_search_path, tenant_transaction
from tenancy.embedded import free_port
from tenancy.scope import TenantScope
from tests.factories import CAMPAIGNS, CONTACTS

# --- error answers ------------------------------------------------------------------------------


async def error_of(response: Any, *statuses: int) -> dict[str, Any]:
    """The `error` object of an error answer (checked: one of `statuses` if any are given, the
    envelope of either route family, a code and a message, no traceback or SQL)."""
    text = await response.get_data(as_text=True)
    if statuses:
        assert response.status_code in statuses, text
    body = json.loads(text)
    assert body.get("status") == "error" or body.get("success") is False, body
    assert set(body["error"]) >= {"code", "message"}, body
    assert "Traceback" not in text and "SELECT" not in text
    return body["error"]  # type: ignore[no-any-return]


async def error_code(response: Any, *statuses: int) -> str:
    """The error code of an error answer, checked as `error_of` checks it."""
    return str((await error_of(response, *statuses))["code"])


async def expect_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert the answer is `status` with error `code`; returns the whole body."""
    error = await error_of(response, status)
    assert error["code"] == code, error
    return await response.get_json()  # type: ignore[no-any-return]


# --- looking into the database ------------------------------------------------------------------


def scope_of(pool: asyncpg.Pool, tenant: Any) -> TenantScope:
    """The tenant's scope, for calling a feature service or job the way the worker does."""
    return TenantScope.of_sub_account(pool, tenant.id)


async def tenant_sql(pool: asyncpg.Pool, tenant: Any, statement: str, *args: Any) -> list[Any]:
    """Run one statement in the tenant's schema (to arrange what the API cannot, or to look)."""
    async with tenant_transaction(pool, tenant.schema) as conn:
        return list(await conn.fetch(statement, *args))


# CONTRACT 2: a timestamp the product writes reads 2026-11-23T04:05:06.789Z, in answers and in
# the JSON it stores alike (a call's tool_calls, an appointment's reminders, event payloads).
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
# Not the product's timestamps: a local time with its offset (a slot's start_local) and what
# a model or a client sent (a tool call's arguments).
_NOT_OURS = ("arguments",)

SELECT_JSON_COLUMNS = """
SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = $1 AND data_type IN ('json', 'jsonb') ORDER BY table_name, column_name
"""


def _off_format(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in _NOT_OURS and not str(key).endswith("_local"):
                yield from _off_format(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _off_format(item, f"{path}[{index}]")
    elif isinstance(value, str) and _DATE_TIME.match(value) and not TIMESTAMP.match(value):
        yield f"{path} = {value!r}"


async def stored_timestamps_off_format(pool: asyncpg.Pool, tenant: Any) -> list[str]:
    """Every date-time string in the tenant's json and jsonb columns that is not ISO 8601 UTC
    with milliseconds and Z, as `table.column.path = value`."""
    found: list[str] = []
    async with tenant_transaction(pool, tenant.schema) as conn:
        for table, column in await conn.fetch(SELECT_JSON_COLUMNS, tenant.schema):
            rows = await conn.fetch(f'SELECT "{column}"::text AS value FROM "{table}"')
            for row in rows:
                if row["value"] is not None:
                    found += _off_format(json.loads(row["value"]), f"{table}.{column}")
    return found


async def balance(pool: asyncpg.Pool, tenant: Any) -> Decimal:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await conn.fetchval("SELECT balance FROM wallet WHERE id = 1")  # type: ignore


async def contact_email(pool: asyncpg.Pool, tenant: Any, contact_id: str) -> str:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return str(
            await conn.fetchval("SELECT email FROM contacts WHERE id = $1", uuid.UUID(contact_id))
        )


async def stored_invoice(pool: asyncpg.Pool, tenant: Any, invoice_id: str) -> asyncpg.Record:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await conn.fetchrow("SELECT * FROM invoices WHERE id = $1", uuid.UUID(invoice_id))


async def count_sub_accounts(pool: asyncpg.Pool, organisation_id: uuid.UUID | None = None) -> int:
    if organisation_id is None:
        return int(await pool.fetchval("SELECT count(*) FROM control.sub_accounts"))
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM control.sub_accounts WHERE organisation_id = $1", organisation_id
        )
    )


async def set_email_config(
    pool: asyncpg.Pool, organisation_id: uuid.UUID, host: str, port: int, from_address: str
) -> None:
    await pool.execute(
        """INSERT INTO control.email_configs (organisation_id, host, port, from_address)
           VALUES ($1, $2, $3, $4)
           ON CONFLICT (organisation_id) DO UPDATE
           SET host = EXCLUDED.host, port = EXCLUDED.port, from_address = EXCLUDED.from_address""",
        organisation_id,
        host,
        port,
        from_address,
    )


async def schema_exists(pool: asyncpg.Pool, schema: str) -> bool:
    return bool(await pool.fetchval("SELECT to_regnamespace($1) IS NOT NULL", schema))


async def deliveries(pool: asyncpg.Pool, tenant: Any) -> list[dict[str, Any]]:
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT id, subscription_id, event_type, message_id, status, attempt_count,"
        " last_status_code, last_error FROM webhook_deliveries ORDER BY created_at, id",
    )
    return [dict(row) for row in rows]


async def attempts(pool: asyncpg.Pool, tenant: Any, delivery_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT attempt_number, status_code, error, duration_ms FROM webhook_attempts"
        " WHERE delivery_id = $1 ORDER BY attempt_number",
        delivery_id,
    )
    return [dict(row) for row in rows]


async def due_rows(pool: asyncpg.Pool, ref_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        "SELECT id, kind, ref_id, version, due_at, last_error"
        " FROM control.due_work WHERE ref_id = ANY($1::uuid[])",
        ref_ids,
    )
    return [dict(row) for row in rows]


async def next_attempt_delay(pool: asyncpg.Pool, tenant: Any, delivery_id: uuid.UUID) -> float:
    """Seconds between the delivery's last recorded attempt and its next one."""
    async with tenant_transaction(pool, tenant.schema) as conn:
        return float(
            await conn.fetchval(
                "SELECT extract(epoch FROM d.next_attempt_at - max(a.attempted_at))"
                " FROM webhook_deliveries AS d JOIN webhook_attempts AS a ON a.delivery_id = d.id"
                " WHERE d.id = $1 GROUP BY d.next_attempt_at",
                delivery_id,
            )
        )


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
    for name, column in (
        ("sub_accounts", "id"),
        ("api_keys", "sub_account_id"),
        ("invitations", "sub_account_id"),
        ("memberships", "sub_account_id"),
    ):
        rows = await pool.fetch(f"SELECT * FROM control.{name} WHERE {column} = $1", tenant.id)
        state[f"control.{name}"] = sorted(repr(sorted(dict(row).items())) for row in rows)
    return state


CONTROL_ROWS = {
    "sub_accounts": "SELECT row_to_json(x)::text FROM control.sub_accounts AS x WHERE id = $1",
    "api_keys": "SELECT row_to_json(x)::text FROM control.api_keys AS x WHERE sub_account_id = $1",
    "memberships": "SELECT row_to_json(x)::text FROM control.memberships AS x "
    "WHERE sub_account_id = $1",
    "invitations": "SELECT row_to_json(x)::text FROM control.invitations AS x "
    "WHERE sub_account_id = $1",
    "users": "SELECT row_to_json(x)::text FROM control.users AS x WHERE id IN "
    "(SELECT user_id FROM control.memberships WHERE sub_account_id = $1)",
}


async def printed_rows(pool: asyncpg.Pool, tenant: Any) -> dict[str, list[str]]:
    """Every stored row of the sub-account, control (users too) and tenant, as PostgreSQL prints
    it (row_to_json): what an export and an import must carry over unchanged."""
    rows: dict[str, list[str]] = {}
    for name, query in CONTROL_ROWS.items():
        rows[f"control.{name}"] = sorted(r[0] for r in await pool.fetch(query, tenant.id))
    # As the control role (as an export reads it): the schema's alembic_version too.
    async with pool.acquire() as conn, conn.transaction():
        await set_search_path(conn, tenant.schema)
        tables = await conn.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = to_regnamespace($1) "
            "AND relkind IN ('r', 'v')",
            tenant.schema,
        )
        for (table,) in tables:
            rows[table] = sorted(
                r[0] for r in await conn.fetch(f'SELECT row_to_json(t)::text FROM "{table}" AS t')
            )
    return rows


# --- campaigns ----------------------------------------------------------------------------------


async def schedule(client: Any, tenant: Any, campaign_id: str, start: datetime) -> Any:
    return await client.post(
        f"{CAMPAIGNS}/{campaign_id}/schedule",
        json={"start_date": start.isoformat()},
        headers=tenant.headers,
    )


async def get_campaign(client: Any, tenant: Any, campaign_id: str) -> dict[str, Any]:
    response = await client.get(f"{CAMPAIGNS}/{campaign_id}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["campaign"]  # type: ignore[no-any-return]


async def wait_for_status(
    client: Any, tenant: Any, campaign_id: str, *statuses: str
) -> dict[str, Any]:
    """Poll until the campaign reaches one of `statuses` (a generous bound, not a timing)."""
    async with asyncio.timeout(90):
        while True:
            campaign = await get_campaign(client, tenant, campaign_id)
            if campaign["status"] in statuses:
                return campaign
            await asyncio.sleep(0.1)


def soon(seconds: float = 2.0) -> datetime:
    return utcnow() + timedelta(seconds=seconds)


async def ledger(pool: asyncpg.Pool, tenant: Any) -> list[asyncpg.Record]:
    """The wallet charges of campaign recipients, oldest first."""
    return await tenant_sql(
        pool,
        tenant,
        "SELECT amount, kind, status, reference_type, reference_id FROM wallet_transactions "
        "WHERE reference_type = 'campaign_recipient' ORDER BY created_at",
    )


async def recipients(pool: asyncpg.Pool, tenant: Any, campaign_id: str) -> list[asyncpg.Record]:
    return await tenant_sql(
        pool,
        tenant,
        "SELECT r.id, r.contact_id, r.state, r.charged_amount, r.sent_at, r.error, c.email "
        "FROM campaign_recipients AS r JOIN contacts AS c ON c.id = r.contact_id "
        "WHERE r.campaign_id = $1",
        uuid.UUID(campaign_id),
    )


# --- mail ---------------------------------------------------------------------------------------


def messages_to(mailbox: Any, address: str) -> list[Message]:
    return mailbox.to(address)  # type: ignore[no-any-return]


def email_text(message: Any) -> str:
    if message.is_multipart():
        return str(message.get_payload(0).get_payload(decode=True).decode())
    return str(message.get_payload(decode=True).decode())


def token_in(message: Any) -> str:
    """The invitation token printed in an invitation email."""
    text = email_text(message)
    for line in text.splitlines():
        if line.startswith("Invitation token:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no token in the email: {text!r}")


def html_part(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/html":
            return str(part.get_payload(decode=True).decode())
    raise AssertionError("no html part")


def tracking_links(message: Message) -> dict[str, str]:
    """kind -> path of the first open, click and unsubscribe link in the message."""
    body = html_part(message)
    links = {}
    for kind in ("open", "click", "unsubscribe"):
        found = re.search(rf"https?://[^/\"']+(/track/{kind}/[A-Za-z0-9_\-.]+)", body)
        assert found, (kind, body)
        links[kind] = found.group(1)
    return links


# --- processes: the CLI and a live system -------------------------------------------------------

SWITCHBOARD = [sys.executable, "-m", "cli"]


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def switchboard(
    servers: Any, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `switchboard ARGS...` as an operator would, against the test servers."""
    env = {
        **os.environ,
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
        **(env or {}),
    }
    return subprocess.run(
        [*SWITCHBOARD, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def wait_for_http(
    url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 60
) -> None:
    """Until `url` answers 200; the process's output in the failure when it exits first."""
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        assert process.poll() is None and time.monotonic() < deadline, (
            f"{url} did not come up:\n" + log.read_text(errors="replace")
        )
        time.sleep(0.2)


@contextlib.contextmanager
def voice_process(
    port: int, values: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """`switchboard voice --port PORT` with `values` added to the environment, answering its
    health check, until the block ends (SIGTERM, then a kill after 30 s)."""
    process = subprocess.Popen(
        [*SWITCHBOARD, "voice", "--port", str(port)],
        env={**os.environ, **values},
        stdin=subprocess.DEVNULL,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", process, log)
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def worker_process(**env: str) -> subprocess.Popen[bytes]:
    """`switchboard worker` as a process of its own (to be killed), with `env` added to this
    process's environment, its output discarded."""
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "worker"],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def restore_environment(saved: dict[str, str | None]) -> None:
    """Put back environment variables as `saved` had them (None: unset)."""
    from tenancy.settings import get_settings

    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    get_settings.cache_clear()


@dataclass
class Live:
    base_url: str
    logs: list[Path]

    def output(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in self.logs)


@contextlib.contextmanager
def live_system(
    servers: Any, mailbox: Any, folder: Path, *, with_worker: bool = True, **extra_env: str
) -> Iterator[Live]:
    """The API (and the worker) as the production commands run them, output kept in files."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
        "SMTP_HOST": mailbox.host,
        "SMTP_PORT": str(mailbox.port),
        "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000",
        **extra_env,
    }
    commands = {"serve": ["serve", "--port", str(port)]}
    if with_worker:
        commands["worker"] = ["worker"]
    processes, logs = [], []
    for name, arguments in commands.items():
        out, err = folder / f"{name}.stdout", folder / f"{name}.stderr"
        logs += [out, err]
        processes.append(
            subprocess.Popen(
                [*SWITCHBOARD, *arguments],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out.open("wb"),
                stderr=err.open("wb"),
            )
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            assert processes[0].poll() is None and time.monotonic() < deadline, (
                "server did not start:\n" + (folder / "serve.stderr").read_text()
            )
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


async def get_contact(client: Any, tenant: Any, contact_id: str) -> dict[str, Any]:
    """The contact as GET /contacts/{id} answers it (asserting 200)."""
    response = await client.get(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["contact"]  # type: ignore[no-any-return]


async def stored_events(pool: asyncpg.Pool, tenant: Any) -> list[dict[str, Any]]:
    """The tenant's event log, oldest first."""
    rows = await tenant_sql(
        pool, tenant, "SELECT id, type, timestamp, data FROM events ORDER BY timestamp, id"
    )
    return [dict(row) for row in rows]
