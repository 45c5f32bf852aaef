"""Tags: merge into and remove from one contact's set, and the sub-account's tag summary.

Each change is one UPDATE whose new set is computed by PostgreSQL from the row it locks, so
concurrent adds and removes on one contact all survive; nothing is written (and no event fired)
when the set would not change.
"""

from __future__ import annotations

import uuid
from typing import Any

from api.contacts.service import CONTACT_COLUMNS, emit_tags_changed
from tenancy.db import fetch_one_or_404
from tenancy.scope import TenantScope

TAG_SCAN = 5000

# `previous` locks the row (the latest version, after any concurrent change commits);
# `changed` is empty when the contact already carries every tag.
ADD_TAGS = f"""
WITH previous AS (
    SELECT id, tags FROM contacts WHERE id = $1 FOR UPDATE
), changed AS (
    UPDATE contacts AS c
    SET tags = c.tags || ARRAY(SELECT t FROM unnest($2::text[]) WITH ORDINALITY AS x(t, n)
                              WHERE t <> ALL (c.tags) ORDER BY n),
        updated_at = now()
    FROM previous
    WHERE c.id = previous.id AND NOT c.tags @> $2::text[]
    RETURNING {", ".join("c." + name.strip() for name in CONTACT_COLUMNS.split(","))}
)
SELECT previous.tags AS previous, changed.* FROM previous LEFT JOIN changed ON true
"""

REMOVE_TAGS = f"""
WITH previous AS (
    SELECT id, tags FROM contacts WHERE id = $1 FOR UPDATE
), changed AS (
    UPDATE contacts AS c
    SET tags = ARRAY(SELECT t FROM unnest(c.tags) WITH ORDINALITY AS x(t, n)
                     WHERE t <> ALL ($2::text[]) ORDER BY n),
        updated_at = now()
    FROM previous
    WHERE c.id = previous.id AND c.tags && $2::text[]
    RETURNING {", ".join("c." + name.strip() for name in CONTACT_COLUMNS.split(","))}
)
SELECT previous.tags AS previous, changed.* FROM previous LEFT JOIN changed ON true
"""

# One aggregate over the newest TAG_SCAN contacts (read through the created_at index).
SELECT_TAG_SUMMARY = """
SELECT tag, count(*) AS count
FROM (SELECT tags FROM contacts ORDER BY created_at DESC, id DESC LIMIT $1) AS newest,
     unnest(newest.tags) AS tag
GROUP BY tag
ORDER BY tag COLLATE "C"
"""


async def add_tags(scope: TenantScope, contact_id: uuid.UUID, tags: list[str]) -> list[str]:
    """The contact's resulting tag set."""
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, ADD_TAGS, contact_id, tags, what="contact")
        if row["id"] is None:
            return list(row["previous"])
        added = [tag for tag in row["tags"] if tag not in row["previous"]]
        await emit_tags_changed(conn, scope.sub_account_id, row, added, [])
        return list(row["tags"])


async def remove_tags(
    scope: TenantScope, contact_id: uuid.UUID, tags: list[str]
) -> tuple[list[str], list[str]]:
    """(remaining set, the given tags that were present)."""
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, REMOVE_TAGS, contact_id, tags, what="contact")
        removed = [tag for tag in tags if tag in row["previous"]]
        if row["id"] is None:
            return list(row["previous"]), removed
        await emit_tags_changed(conn, scope.sub_account_id, row, [], removed)
        return list(row["tags"]), removed


async def tag_summary(scope: TenantScope) -> list[dict[str, Any]]:
    async with scope.transaction() as conn:
        rows = await conn.fetch(SELECT_TAG_SUMMARY, TAG_SCAN)
    return [{"tag": row["tag"], "count": row["count"]} for row in rows]
