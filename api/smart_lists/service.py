"""Smart lists: a name and tags; the list is the contacts carrying any of the tags, live."""

from __future__ import annotations

import uuid
from typing import Any

from tenancy.db import fetch_one_or_404, fetch_page
from tenancy.scope import TenantScope

SMART_LIST_COLUMNS = """
s.id, s.name, s.tags, s.created_at, s.updated_at,
(SELECT count(*) FROM contacts AS c WHERE c.tags && s.tags) AS contact_count
"""

INSERT_SMART_LIST = f"""
WITH s AS (INSERT INTO smart_lists (name, tags) VALUES ($1, $2) RETURNING *)
SELECT {SMART_LIST_COLUMNS} FROM s
"""

SELECT_SMART_LIST = f"SELECT {SMART_LIST_COLUMNS} FROM smart_lists AS s WHERE s.id = $1"

SELECT_SMART_LISTS = f"""
SELECT {SMART_LIST_COLUMNS}, count(*) OVER () AS total
FROM smart_lists AS s
ORDER BY s.created_at DESC, s.id DESC
LIMIT $1 OFFSET $2
"""

COUNT_SMART_LISTS = "SELECT count(*) FROM smart_lists"


async def create_smart_list(scope: TenantScope, name: str, tags: list[str]) -> dict[str, Any]:
    async with scope.transaction() as conn:
        return dict(await conn.fetchrow(INSERT_SMART_LIST, name, tags))


async def get_smart_list(scope: TenantScope, smart_list_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_SMART_LIST, smart_list_id, what="smart list")
    return dict(row)


async def list_smart_lists(
    scope: TenantScope, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    async with scope.transaction() as conn:
        return await fetch_page(conn, SELECT_SMART_LISTS, COUNT_SMART_LISTS, limit, offset)
