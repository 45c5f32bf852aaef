"""Notes on a contact: kept locally (never mirrored to a CRM), soft-deleted, newest first."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from tenancy.errors import not_found
from tenancy.scope import TenantScope

INSERT_NOTE = """
INSERT INTO notes (contact_id, content)
SELECT id, $2 FROM contacts WHERE id = $1
RETURNING id, contact_id, content, created_at
"""

# One row per active note, or one row of NULLs for a contact without notes; none: no contact.
SELECT_NOTES = """
SELECT n.id, n.contact_id, n.content, n.agent_id, n.created_at, n.updated_at
FROM contacts AS c
LEFT JOIN notes AS n ON n.contact_id = c.id AND n.deleted_at IS NULL
WHERE c.id = $1
ORDER BY n.created_at DESC, n.id DESC
"""

SOFT_DELETE_NOTE = """
UPDATE notes SET deleted_at = now(), updated_at = now()
WHERE id = $2 AND contact_id = $1 AND deleted_at IS NULL
RETURNING id
"""

CONTACT_EXISTS = "SELECT EXISTS (SELECT 1 FROM contacts WHERE id = $1)"


async def create_note(scope: TenantScope, contact_id: uuid.UUID, content: str) -> dict[str, Any]:
    try:
        async with scope.transaction() as conn:
            row = await conn.fetchrow(INSERT_NOTE, contact_id, content)
    except asyncpg.ForeignKeyViolationError:
        # The contact was deleted while the note was written.
        row = None
    if row is None:
        raise not_found("contact")
    return dict(row)


async def list_notes(scope: TenantScope, contact_id: uuid.UUID) -> list[dict[str, Any]]:
    async with scope.transaction() as conn:
        rows = await conn.fetch(SELECT_NOTES, contact_id)
    if not rows:
        raise not_found("contact")
    return [dict(row) for row in rows if row["id"] is not None]


async def delete_note(scope: TenantScope, contact_id: uuid.UUID, note_id: uuid.UUID) -> None:
    async with scope.transaction() as conn:
        if await conn.fetchval(SOFT_DELETE_NOTE, contact_id, note_id) is not None:
            return
        contact_exists = await conn.fetchval(CONTACT_EXISTS, contact_id)
    raise not_found("note" if contact_exists else "contact")
