"""Switchboard behind PgBouncer in transaction mode (issue 7): what CI's second pass proves.

CI's second pass runs the whole suite with DATABASE_URL naming Debian's PgBouncer
(`pool_mode = transaction`), SWITCHBOARD_DIRECT_DATABASE_URL naming PostgreSQL, and
SWITCHBOARD_TEST_PGBOUNCER=1. Then `bouncer` must find PgBouncer's admin console behind
DATABASE_URL (or the test fails), and the tests below prove what the app relies on there: the
tenant set by `SET LOCAL` never outlives its transaction although server connections are shared,
parameterised queries work when repeated and run concurrently (asyncpg's unnamed statements), and
`pg_notify` sent through PgBouncer reaches a LISTEN on the direct URL. Without PgBouncer the same
tests run against PostgreSQL itself; only the check of PgBouncer's own settings is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import psycopg
import pytest

from tenancy.db import asyncpg_dsn, session_url, tenant_transaction
from tenancy.settings import get_settings
from tests.conftest import Servers
from tests.factories import Tenant

CONTACTS = "/webhooks/inbound/contacts"


async def _console(database_url: str, *commands: str) -> list[list[tuple[Any, ...]]] | None:
    """Rows of PgBouncer admin-console commands at DATABASE_URL's host and port; None when no
    PgBouncer answers there (the console only speaks the simple query protocol)."""
    parts = urlsplit(database_url)
    try:
        conn = await psycopg.AsyncConnection.connect(
            host=parts.hostname,
            port=parts.port or 5432,
            user=parts.username or "postgres",
            password=parts.password,
            dbname="pgbouncer",
            autocommit=True,
            connect_timeout=5,
            cursor_factory=psycopg.AsyncClientCursor,
        )
    except psycopg.OperationalError:
        return None
    try:
        return [await (await conn.execute(command)).fetchall() for command in commands]
    finally:
        await conn.close()


@pytest.fixture
async def bouncer(servers: Servers) -> dict[str, str] | None:
    """PgBouncer's version and settings when DATABASE_URL is PgBouncer, else None."""
    answer = await _console(servers.database_url, "SHOW VERSION", "SHOW CONFIG")
    if answer is None:
        if os.environ.get("SWITCHBOARD_TEST_PGBOUNCER"):
            pytest.fail(
                "SWITCHBOARD_TEST_PGBOUNCER is set but no PgBouncer answers at DATABASE_URL"
            )
        return None
    version, config = answer
    return {"version": version[0][0], **{row[0]: row[1] for row in config}}


def _is_pgbouncer(bouncer: dict[str, str] | None) -> bool:
    return bouncer is not None


async def _contact(pool: asyncpg.Pool, schema: str, email: str) -> None:
    async with tenant_transaction(pool, schema) as conn:
        await conn.execute("INSERT INTO contacts (name, email) VALUES ($1, $2)", "Probe", email)


async def test_ci_runs_behind_pgbouncer_in_transaction_mode(
    bouncer: dict[str, str] | None, servers: Servers
) -> None:
    if bouncer is None:
        pytest.skip("DATABASE_URL is not PgBouncer (CI's second pass runs this)")
    assert bouncer["version"].startswith("PgBouncer")
    assert bouncer["pool_mode"] == "transaction"
    major, minor = (int(part) for part in bouncer["version"].split()[1].split(".")[:2])
    if (major, minor) < (1, 21):
        # Named prepared statements do not survive transaction pooling before 1.21.
        assert get_settings().db_statement_cache_size == 0
    # Sessions that must outlive a transaction (LISTEN, session advisory locks, migrations)
    # go to PostgreSQL itself.
    assert session_url(servers.database_url) == servers.direct_url != servers.database_url


async def test_interleaved_tenant_transactions_each_see_only_their_own_schema(
    pool: asyncpg.Pool, tenant: Tenant, tenant_second: Tenant, bouncer: dict[str, str] | None
) -> None:
    mine, theirs = f"a-{uuid.uuid4().hex}@example.com", f"b-{uuid.uuid4().hex}@example.com"
    await _contact(pool, tenant.schema, mine)
    await _contact(pool, tenant_second.schema, theirs)
    expected = {tenant.schema: [mine], tenant_second.schema: [theirs]}
    served: dict[int, set[str]] = {}

    async def check(conn: asyncpg.Connection, schema: str) -> None:
        row = await conn.fetchrow(
            "SELECT current_setting('search_path') AS path, pg_backend_pid() AS pid, "
            "array(SELECT email FROM contacts WHERE email = ANY($1::text[])) AS emails",
            [mine, theirs],
        )
        assert row["path"].split(",")[0].strip() == schema
        assert row["emails"] == expected[schema]
        served.setdefault(row["pid"], set()).add(schema)

    # Both transactions open at once, statements interleaved.
    async with (
        tenant_transaction(pool, tenant.schema) as first,
        tenant_transaction(pool, tenant_second.schema) as second,
    ):
        for _ in range(5):
            await check(first, tenant.schema)
            await check(second, tenant_second.schema)
    # One after the other: a server connection that served one tenant serves the next.
    for _ in range(20):
        for schema in (tenant.schema, tenant_second.schema):
            async with tenant_transaction(pool, schema) as conn:
                await check(conn, schema)
    # Outside a transaction no tenant is left on any connection.
    paths = await asyncio.gather(
        *(pool.fetchval("SELECT current_setting('search_path')") for _ in range(30))
    )
    assert all("t_" not in path for path in paths)
    if _is_pgbouncer(bouncer):
        # The point of the exercise: PgBouncer really handed one server connection to both.
        assert any(len(schemas) == 2 for schemas in served.values())


async def test_repeated_and_concurrent_parameterised_queries_work(
    pool: asyncpg.Pool, tenant: Tenant
) -> None:
    email = f"p-{uuid.uuid4().hex}@example.com"
    await _contact(pool, tenant.schema, email)

    async def outside(n: int) -> None:
        for i in range(25):
            row = await pool.fetchrow(
                "SELECT $1::int + $2::int AS total, $3::uuid AS id, $4::jsonb AS doc",
                n,
                i,
                tenant.id,
                {"n": n, "i": i},
            )
            assert (row["total"], row["id"], row["doc"]) == (n + i, tenant.id, {"n": n, "i": i})
            assert (
                await pool.fetchval(
                    "SELECT schema_name FROM control.sub_accounts WHERE id = $1", tenant.id
                )
                == tenant.schema
            )

    async def inside(n: int) -> None:
        for _ in range(10):
            async with tenant_transaction(pool, tenant.schema) as conn:
                assert (
                    await conn.fetchval("SELECT count(*) FROM contacts WHERE email = $1", email)
                    == 1
                )
                assert await conn.fetchval("SELECT $1::text || $2::text", "n", str(n)) == f"n{n}"

    await asyncio.gather(*(outside(n) for n in range(8)), *(inside(n) for n in range(8)))


async def test_api_requests_of_two_tenants_at_once_see_only_their_own_contacts(
    client: Any, tenant: Tenant, tenant_second: Tenant
) -> None:
    emails = {}
    for who in (tenant, tenant_second):
        emails[who.id] = f"api-{uuid.uuid4().hex}@example.com"
        response = await client.post(
            CONTACTS, headers=who.headers, json={"name": "Probe", "email": emails[who.id]}
        )
        assert response.status_code == 201, await response.get_data(as_text=True)

    async def listed(who: Tenant) -> tuple[Tenant, list[str]]:
        response = await client.get(CONTACTS, headers=who.headers)
        assert response.status_code == 200
        return who, [contact["email"] for contact in (await response.get_json())["contacts"]]

    answers = await asyncio.gather(
        *(listed(who) for _ in range(10) for who in (tenant, tenant_second))
    )
    for who, listed_emails in answers:
        assert listed_emails == [emails[who.id]]


async def test_notify_through_the_pool_reaches_listen_on_the_direct_url(
    pool: asyncpg.Pool, servers: Servers, tenant: Tenant
) -> None:
    channel = f"probe_{uuid.uuid4().hex[:12]}"
    received: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(asyncpg_dsn(session_url(servers.database_url)))
    try:
        await listener.add_listener(channel, lambda *args: received.put_nowait(args[-1]))
        async with tenant_transaction(pool, tenant.schema) as conn:
            await conn.execute("SELECT pg_notify($1, $2)", channel, json.dumps({"n": 1}))
            assert received.empty()  # delivered on commit, not before
        assert json.loads(await asyncio.wait_for(received.get(), timeout=10)) == {"n": 1}
    finally:
        await listener.close()
