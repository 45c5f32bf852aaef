"""Companies a contact can belong to."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

COMPANY_COLUMNS = "id, name, created_at, updated_at"

INSERT_COMPANY = f"INSERT INTO companies (name) VALUES ($1) RETURNING {COMPANY_COLUMNS}"

SELECT_COMPANIES = f"""
SELECT {COMPANY_COLUMNS} FROM companies ORDER BY created_at DESC, id DESC LIMIT $1 OFFSET $2
"""

COUNT_COMPANIES = "SELECT count(*) FROM companies"

COMPANY_EXISTS = "SELECT EXISTS (SELECT 1 FROM companies WHERE id = $1)"


async def create_company(conn: asyncpg.Connection, name: str) -> dict[str, Any]:
    return dict(await conn.fetchrow(INSERT_COMPANY, name.strip()))


async def list_companies(
    conn: asyncpg.Connection, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    rows = await conn.fetch(SELECT_COMPANIES, limit, offset)
    return [dict(row) for row in rows], await conn.fetchval(COUNT_COMPANIES)


async def company_exists(conn: asyncpg.Connection, company_id: uuid.UUID) -> bool:
    return bool(await conn.fetchval(COMPANY_EXISTS, company_id))
