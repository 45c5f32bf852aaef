"""A request retried after a stale cached statement does not meet a stale one again.

With some tenants migrated and some not, one statement text has two result shapes. Between a
request's failed attempt and its retry, other requests on the same pooled connection may prepare
that text again for a tenant of the other shape; the retry prepares its statements afresh. Against
the real PostgreSQL, on a pool of one connection with asyncpg's statement cache on.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from tenancy.db import (
    STALE_STATEMENT_ATTEMPTS,
    TENANT_ROLE,
    control_transaction,
    create_pool,
    retry_stale_statements,
    tenant_transaction,
)
from tenancy.settings import get_settings

READ = "SELECT v FROM shaped ORDER BY v"


@pytest.fixture
async def two_shapes(pool: asyncpg.Pool) -> AsyncIterator[tuple[str, str]]:
    """Two scratch tenant schemas whose `shaped.v` differ in type, as before and after a
    migration that changes a column's type."""
    before, after = (f"t_{uuid.uuid4().hex}" for _ in range(2))
    await pool.execute(
        f"CREATE SCHEMA {before}; CREATE TABLE {before}.shaped (v text);"
        f"INSERT INTO {before}.shaped VALUES ('before');"
        f"CREATE SCHEMA {after}; CREATE TABLE {after}.shaped (v varchar(20));"
        f"INSERT INTO {after}.shaped VALUES ('after');"
        # Granted as a tenant schema is, so that its tenant transactions may read it.
        f"GRANT USAGE ON SCHEMA {before}, {after} TO {TENANT_ROLE};"
        f"GRANT SELECT ON {before}.shaped, {after}.shaped TO {TENANT_ROLE}"
    )
    yield before, after
    await pool.execute(f"DROP SCHEMA {before} CASCADE; DROP SCHEMA {after} CASCADE")


@pytest.fixture
def statement_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SWITCHBOARD_DB_STATEMENT_CACHE_SIZE", "100")
    get_settings.cache_clear()
    yield
    monkeypatch.delenv("SWITCHBOARD_DB_STATEMENT_CACHE_SIZE")
    get_settings.cache_clear()


async def test_a_retry_prepares_afresh_what_another_request_cached_meanwhile(
    servers: Any, two_shapes: tuple[str, str], statement_cache: None
) -> None:
    before, after = two_shapes
    one = await create_pool(servers.direct_url, min_size=1, max_size=1)
    attempts = 0

    async def another_request_reads_the_unmigrated_tenant() -> None:
        async with tenant_transaction(one, before) as conn:
            assert [r["v"] for r in await conn.fetch(READ)] == ["before"]

    async def read_the_migrated_tenant() -> list[str]:
        nonlocal attempts
        attempts += 1
        # Its own task and context, as a concurrent request has: on the only connection, it
        # caches READ with the old shape before each attempt.
        await asyncio.create_task(
            another_request_reads_the_unmigrated_tenant(), context=contextvars.Context()
        )
        async with tenant_transaction(one, after) as conn:
            return [r["v"] for r in await conn.fetch(READ)]

    try:
        assert await retry_stale_statements(read_the_migrated_tenant) == ["after"]
    finally:
        await one.close()
    assert attempts == 2 < STALE_STATEMENT_ATTEMPTS


async def _lock_in_order(pool: asyncpg.Pool, first: int, second: int, met: asyncio.Barrier) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", first)
        await met.wait()
        await conn.execute("SELECT pg_advisory_xact_lock($1)", second)


async def test_work_that_loses_a_deadlock_runs_again_and_both_sides_finish(
    pool: asyncpg.Pool,
) -> None:
    # Two transactions that take two locks in opposite orders: PostgreSQL rolls one back with
    # DeadlockDetectedError (CONTRACT 18a: no request answers 500 for a race).
    met = asyncio.Barrier(2)
    runs = {"a": 0, "b": 0}
    keys = [uuid.uuid4().int % 2**62 for _ in range(2)]

    async def side(name: str, first: int, second: int) -> str:
        async def work() -> str:
            runs[name] += 1
            await _lock_in_order(
                pool, first, second, met if runs[name] == 1 else asyncio.Barrier(1)
            )
            return name

        return await retry_stale_statements(work)

    done = await asyncio.gather(side("a", *keys), side("b", *reversed(keys)))

    assert done == ["a", "b"]
    assert sorted(runs.values()) == [1, 2]


async def test_work_that_committed_before_a_deadlock_is_not_run_again(pool: asyncpg.Pool) -> None:
    runs = 0

    async def work() -> None:
        nonlocal runs
        runs += 1
        async with control_transaction(pool) as conn:
            await conn.execute("SELECT 1")
        raise asyncpg.DeadlockDetectedError("deadlock detected")

    with pytest.raises(asyncpg.DeadlockDetectedError):
        await retry_stale_statements(work)

    assert runs == 1
