"""Tenant switching: SET LOCAL only, so pooled connections never carry a tenant over."""

from __future__ import annotations

import asyncio
import random
from decimal import Decimal

import pytest

from api.wallet import service as wallet
from tenancy.db import create_pool, tenant_transaction
from tests.factories import make_tenant


async def test_search_path_is_reset_when_the_tenant_transaction_ends(migrated, tenant) -> None:
    pool = await create_pool(migrated, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            default = await conn.fetchval("SHOW search_path")
        async with tenant_transaction(pool, tenant.schema) as conn:
            assert await conn.fetchval("SHOW search_path") == f"{tenant.schema}, public"
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW search_path") == default
            assert await conn.fetchval("SELECT to_regclass('wallet')") is None
    finally:
        await pool.close()


async def test_two_tenants_interleaving_on_one_small_pool_each_see_only_their_own_rows(
    client, agency, migrated
) -> None:
    first, second = await make_tenant(client, agency), await make_tenant(client, agency)
    pool = await create_pool(migrated, min_size=2, max_size=2)
    balances = {first.schema: Decimal("11.00"), second.schema: Decimal("22.00")}
    try:
        for schema, amount in balances.items():
            async with tenant_transaction(pool, schema) as conn:
                await wallet.credit(conn, amount)

        async def read(schema: str) -> tuple[str, Decimal, Decimal]:
            async with tenant_transaction(pool, schema) as conn:
                before = await conn.fetchval("SELECT balance FROM wallet")
                await asyncio.sleep(random.random() / 500)  # let the other tenant in between
                after = await conn.fetchval("SELECT balance FROM wallet")
            return schema, before, after

        schemas = [first.schema, second.schema] * 100
        random.shuffle(schemas)
        results = await asyncio.gather(*(read(schema) for schema in schemas))
        for schema, before, after in results:
            assert before == after == balances[schema]
    finally:
        await pool.close()


async def test_tenant_transaction_refuses_a_name_that_is_not_a_tenant_schema(pool) -> None:
    with pytest.raises(ValueError):
        async with tenant_transaction(pool, "control; DROP SCHEMA control"):
            pass
