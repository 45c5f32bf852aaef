"""Number pools: a named, ordered set of the sub-account's numbers used round-robin as caller ID.

The round robin is one `UPDATE ... RETURNING` on the pool's cursor: the row lock hands every
concurrent call its own position, so calls spread evenly whatever their timing.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from tenancy.db import fetch_one_or_404, fetch_page
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

INSERT_POOL = "INSERT INTO number_pools (name) VALUES ($1) RETURNING id, name, created_at"

INSERT_MEMBERS = """
INSERT INTO number_pool_members (pool_id, phone_number_id, position)
SELECT $1, member, position FROM unnest($2::uuid[]) WITH ORDINALITY AS m (member, position)
"""

SELECT_ACTIVE_IDS = "SELECT id FROM phone_numbers WHERE id = ANY($1::uuid[]) AND is_active"

SELECT_POOL = "SELECT id, name, created_at FROM number_pools WHERE id = $1"

SELECT_MEMBERS = """
SELECT m.phone_number_id
FROM number_pool_members AS m JOIN phone_numbers AS p ON p.id = m.phone_number_id
WHERE m.pool_id = $1 AND p.is_active
ORDER BY m.position
"""

SELECT_POOLS_PAGE = """
SELECT p.id, p.name, p.created_at, m.ids AS phone_number_ids, count(*) OVER () AS total
FROM number_pools AS p
CROSS JOIN LATERAL (
    SELECT COALESCE(array_agg(m.phone_number_id ORDER BY m.position), '{}'::uuid[]) AS ids
    FROM number_pool_members AS m JOIN phone_numbers AS n ON n.id = m.phone_number_id
    WHERE m.pool_id = p.id AND n.is_active
) AS m
ORDER BY p.created_at DESC, p.id DESC
LIMIT $1 OFFSET $2
"""

COUNT_POOLS = "SELECT count(*) FROM number_pools"

TAKE_TURN = """
UPDATE number_pools SET cursor = cursor + 1, updated_at = now()
WHERE id = $1
RETURNING cursor - 1
"""

SELECT_ACTIVE_MEMBERS = """
SELECT p.id, p.phone_number, p.provider
FROM number_pool_members AS m JOIN phone_numbers AS p ON p.id = m.phone_number_id
WHERE m.pool_id = $1 AND p.is_active
ORDER BY m.position
"""


async def create_pool(scope: TenantScope, name: str, number_ids: list[uuid.UUID]) -> dict[str, Any]:
    members = list(dict.fromkeys(number_ids))
    async with scope.transaction() as conn:
        found = {row["id"] for row in await conn.fetch(SELECT_ACTIVE_IDS, members)}
        if len(found) != len(members):
            raise not_found("phone number")
        row = await conn.fetchrow(INSERT_POOL, name.strip())
        await conn.execute(INSERT_MEMBERS, row["id"], members)
    return {**dict(row), "phone_number_ids": members}


async def get_pool(scope: TenantScope, pool_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_POOL, pool_id, what="number pool")
        members = [r["phone_number_id"] for r in await conn.fetch(SELECT_MEMBERS, pool_id)]
    return {**dict(row), "phone_number_ids": members}


async def list_pools(
    scope: TenantScope, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of pools, newest first, each as GET /number-pools/{id} shows it."""
    async with scope.transaction() as conn:
        return await fetch_page(conn, SELECT_POOLS_PAGE, COUNT_POOLS, limit, offset)


async def next_caller_id(conn: asyncpg.Connection, pool_id: uuid.UUID) -> asyncpg.Record:
    """The pool's next number, in the caller's transaction (which holds the turn until commit)."""
    turn = await conn.fetchval(TAKE_TURN, pool_id)
    if turn is None:
        raise not_found("number pool")
    numbers = await conn.fetch(SELECT_ACTIVE_MEMBERS, pool_id)
    if not numbers:
        raise APIError(400, "number_pool_empty", "the number pool has no active numbers")
    return numbers[turn % len(numbers)]
