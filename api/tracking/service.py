"""What a tracked open, click or unsubscribe records on the campaign recipient (once each)."""

from __future__ import annotations

import uuid

import asyncpg

from api.consent.service import set_consent
from tenancy.db import schema_name_for, tenant_transaction

SUB_ACCOUNT_ACTIVE = """
SELECT EXISTS (SELECT 1 FROM control.sub_accounts WHERE id = $1 AND status = 'active')
"""

OPENED = """
UPDATE campaign_recipients SET opened_at = COALESCE(opened_at, now())
WHERE id = $1 AND state = 'sent'
RETURNING id
"""

CLICKED = """
UPDATE campaign_recipients
SET clicked_at = COALESCE(clicked_at, now()), opened_at = COALESCE(opened_at, now())
WHERE id = $1 AND state = 'sent'
RETURNING id
"""

UNSUBSCRIBED = """
UPDATE campaign_recipients SET unsubscribed_at = COALESCE(unsubscribed_at, now())
WHERE id = $1 AND state = 'sent'
RETURNING contact_id
"""



async def _schema(pool: asyncpg.Pool, sub_account_id: uuid.UUID) -> str | None:
    if not await pool.fetchval(SUB_ACCOUNT_ACTIVE, sub_account_id):
        return None
    return schema_name_for(sub_account_id)


async def record_open(pool: asyncpg.Pool, sub_account_id: uuid.UUID,
                      recipient_id: uuid.UUID) -> bool:
    schema = await _schema(pool, sub_account_id)
    if schema is None:
        return False
    async with tenant_transaction(pool, schema) as conn:
        return await conn.fetchval(OPENED, recipient_id) is not None


async def record_click(pool: asyncpg.Pool, sub_account_id: uuid.UUID,
                       recipient_id: uuid.UUID) -> bool:
    schema = await _schema(pool, sub_account_id)
    if schema is None:
        return False
    async with tenant_transaction(pool, schema) as conn:
        return await conn.fetchval(CLICKED, recipient_id) is not None


async def record_unsubscribe(pool: asyncpg.Pool, sub_account_id: uuid.UUID,
                             recipient_id: uuid.UUID, source: str) -> bool:
    """The contact's email consent is revoked (`source`: the link, or the one-click header);
    the campaign counts the unsubscribe once."""
    schema = await _schema(pool, sub_account_id)
    if schema is None:
        return False
    async with tenant_transaction(pool, schema) as conn:
        row = await conn.fetchrow(UNSUBSCRIBED, recipient_id)
        if row is None:
            return False
        await set_consent(conn, row["contact_id"], "email", "revoked", source)
    return True
