"""Organisations (agencies) and their agency keys."""

from __future__ import annotations

import uuid

import asyncpg

from tenancy.principals import insert_key

INSERT_ORGANISATION = """
INSERT INTO control.organisations (name, plan_type, is_active, max_sub_accounts)
VALUES ($1, $2, $3, $4)
RETURNING id
"""


async def create_organisation(
    pool: asyncpg.Pool,
    name: str,
    plan_type: str = "white_label",
    max_sub_accounts: int = 100,
    is_active: bool = True,
) -> tuple[uuid.UUID, str]:
    """Create an organisation and its first agency key; return (id, key)."""
    async with pool.acquire() as conn, conn.transaction():
        organisation_id = await conn.fetchval(
            INSERT_ORGANISATION, name, plan_type, is_active, max_sub_accounts
        )
        _, key = await insert_key(conn, "agency", organisation_id, None, "initial agency key")
    return organisation_id, key
