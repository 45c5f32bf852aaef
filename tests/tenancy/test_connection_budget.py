"""A pooled connection is replaced once it has served its budget of tenants (issue 28 point 1).

Against the real PostgreSQL: which server backend ran each transaction is `pg_backend_pid()`.
The pools under test connect to PostgreSQL itself (`servers.direct_url`, the database URL
unless it names PgBouncer): behind PgBouncer a connection the pool closes leaves its server
backend to PgBouncer, whose `server_lifetime` bounds it (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg
import pytest

from tenancy.db import create_pool, tenant_transaction
from tenancy.provisioning import NewSubAccount, provision_sub_account
from tenancy.settings import get_settings
from tests.factories import Agency, make_agency, unique_email

BUDGET = 3
PID_AND_XID = "SELECT pg_backend_pid(), pg_current_xact_id()::text"


@pytest.fixture
def budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], None]]:
    def set_budget(tenants: int) -> None:
        monkeypatch.setenv("SWITCHBOARD_DB_CONNECTION_MAX_TENANTS", str(tenants))
        get_settings.cache_clear()

    yield set_budget
    monkeypatch.delenv("SWITCHBOARD_DB_CONNECTION_MAX_TENANTS", raising=False)
    get_settings.cache_clear()


@pytest.fixture
async def schemas(pool: asyncpg.Pool) -> list[str]:
    """Eight sub-accounts of one agency, provisioned as the API does."""
    agency: Agency = await make_agency(pool)
    made = []
    for n in range(8):
        request = NewSubAccount(unique_email("owner"), f"Budget {n}", None, None)
        created = await provision_sub_account(pool, agency.id, request)
        made.append(f"t_{uuid.UUID(str(created['sub_account_id'])).hex}")
    return made


@pytest.fixture
def direct(servers: Any, migrated: str) -> str:
    """The migrated test database on PostgreSQL itself."""
    return str(servers.direct_url)


@pytest.fixture
async def one_connection(direct: str, budget: Callable[[int], None]) -> AsyncIterator[Any]:
    budget(BUDGET)
    pool = await create_pool(direct, min_size=1, max_size=1)
    yield pool
    await pool.close()


async def _backend(pool: asyncpg.Pool, schema: str) -> int:
    async with tenant_transaction(pool, schema) as conn:
        return int(await conn.fetchval("SELECT pg_backend_pid()"))


async def _alive(pool: asyncpg.Pool, pid: int) -> bool:
    found = await pool.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)
    return bool(found)


async def test_connection_is_replaced_after_serving_its_budget_of_tenants(
    one_connection: asyncpg.Pool, pool: asyncpg.Pool, schemas: list[str]
) -> None:
    # given one pooled connection with a budget of 3 tenants
    # when it serves tenants 1, 2, 1 again, 2 again: still the same backend
    first = [await _backend(one_connection, s) for s in schemas[:2] + schemas[:2]]
    assert len(set(first)) == 1
    # when the third distinct tenant's transaction ends, the connection is closed
    third = await _backend(one_connection, schemas[2])
    assert third == first[0]
    # then the next transaction runs on a new backend, and the old one is gone
    after = await _backend(one_connection, schemas[0])
    assert after != third
    for _ in range(50):
        if not await _alive(pool, third):
            break
        await asyncio.sleep(0.05)
    assert not await _alive(pool, third)


async def test_same_tenant_again_does_not_spend_the_budget(
    one_connection: asyncpg.Pool, schemas: list[str]
) -> None:
    pids = {await _backend(one_connection, schemas[0]) for _ in range(20)}
    assert len(pids) == 1


async def test_budget_zero_never_replaces(
    direct: str, budget: Callable[[int], None], schemas: list[str]
) -> None:
    budget(0)
    unbounded = await create_pool(direct, min_size=1, max_size=1)
    try:
        pids = {await _backend(unbounded, s) for s in schemas}
    finally:
        await unbounded.close()
    assert len(pids) == 1


async def test_a_transaction_is_never_split_by_the_replacement(
    one_connection: asyncpg.Pool, schemas: list[str]
) -> None:
    # given a connection one tenant short of its budget
    for schema in schemas[:2]:
        await _backend(one_connection, schema)
    # when the transaction that spends the budget runs several statements and a write
    async with tenant_transaction(one_connection, schemas[2]) as conn:
        seen = {tuple(await conn.fetchrow(PID_AND_XID)) for _ in range(5)}
        await conn.execute("UPDATE wallet SET balance = balance + 1 WHERE id = 1")
        seen.add(tuple(await conn.fetchrow(PID_AND_XID)))
    # then all of it ran on one backend in one transaction, and it committed
    assert len(seen) == 1
    async with tenant_transaction(one_connection, schemas[2]) as conn:
        assert await conn.fetchval("SELECT balance FROM wallet WHERE id = 1") == 1
        assert int(await conn.fetchval("SELECT pg_backend_pid()")) != seen.pop()[0]


async def test_a_failed_transaction_that_spends_the_budget_rolls_back_and_retires(
    one_connection: asyncpg.Pool, schemas: list[str]
) -> None:
    for schema in schemas[:2]:
        await _backend(one_connection, schema)
    with pytest.raises(RuntimeError):
        async with tenant_transaction(one_connection, schemas[2]) as conn:
            old = int(await conn.fetchval("SELECT pg_backend_pid()"))
            await conn.execute("UPDATE wallet SET balance = balance + 5 WHERE id = 1")
            raise RuntimeError("the work failed")
    async with tenant_transaction(one_connection, schemas[2]) as conn:
        assert await conn.fetchval("SELECT balance FROM wallet WHERE id = 1") == 0
        assert int(await conn.fetchval("SELECT pg_backend_pid()")) != old


async def test_no_transaction_fails_while_connections_are_replaced_under_load(
    direct: str, budget: Callable[[int], None], schemas: list[str]
) -> None:
    # given a pool of 3 connections with a budget of 3 tenants, and 8 tenants
    budget(BUDGET)
    small = await create_pool(direct, min_size=1, max_size=3)
    pids: set[int] = set()

    async def work(n: int) -> None:
        schema = schemas[n % len(schemas)]
        async with tenant_transaction(small, schema) as conn:
            pid = int(await conn.fetchval("SELECT pg_backend_pid()"))
            await conn.execute("UPDATE wallet SET balance = balance + 1 WHERE id = 1")
            assert int(await conn.fetchval("SELECT pg_backend_pid()")) == pid
            pids.add(pid)

    try:
        # when 400 transactions run 24 at a time
        for start in range(0, 400, 24):
            await asyncio.gather(*(work(n) for n in range(start, min(400, start + 24))))
        # then every one committed, on many successive backends
        total = 0
        for schema in schemas:
            async with tenant_transaction(small, schema) as conn:
                total += await conn.fetchval("SELECT balance FROM wallet WHERE id = 1")
    finally:
        await small.close()
    assert total == 400
    assert len(pids) > 10


async def test_provisioning_counts_the_new_schema(
    one_connection: asyncpg.Pool, pool: asyncpg.Pool
) -> None:
    agency = await make_agency(pool)
    pids = set()
    for n in range(BUDGET + 1):
        request = NewSubAccount(unique_email("owner"), f"Budget p{n}", None, None)
        await provision_sub_account(one_connection, agency.id, request)
        pids.add(await one_connection.fetchval("SELECT pg_backend_pid()"))
    assert len(pids) == 2


def test_migration_worker_replaces_its_connection_after_its_budget(
    servers: Any, budget: Callable[[int], None], schemas: list[str]
) -> None:
    from sqlalchemy import text

    from tenancy import migrate
    from tenancy.schema import head_revision

    budget(2)
    migrate._worker_init(servers.direct_url, None)
    migrate._served = 0
    head = head_revision("tenant")

    def backend() -> int:
        with migrate._engine.connect() as conn:
            return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())

    try:
        pids = []
        for schema in schemas[:4]:
            sid, error = migrate.migrate_one(uuid.UUID(schema[2:]), schema, head)
            assert error is None
            pids.append(backend())
    finally:
        migrate._engine.dispose()
    assert pids[0] != pids[1] and pids[1] == pids[2] and pids[2] != pids[3]
