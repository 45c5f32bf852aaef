"""What a tracked open, click or unsubscribe records on the campaign recipient (once each)."""

from __future__ import annotations

import uuid

from api.consent.service import set_consent
from tenancy.scope import TenantScope

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


async def record_open(scope: TenantScope | None, recipient_id: uuid.UUID) -> bool:
    """`scope`: the link's sub-account while it is active (None: nothing is recorded)."""
    if scope is None:
        return False
    async with scope.transaction() as conn:
        return await conn.fetchval(OPENED, recipient_id) is not None


async def record_click(scope: TenantScope | None, recipient_id: uuid.UUID) -> bool:
    if scope is None:
        return False
    async with scope.transaction() as conn:
        return await conn.fetchval(CLICKED, recipient_id) is not None


async def record_unsubscribe(
    scope: TenantScope | None, recipient_id: uuid.UUID, source: str
) -> bool:
    """The contact's email consent is revoked (`source`: the link, or the one-click header);
    the campaign counts the unsubscribe once."""
    if scope is None:
        return False
    async with scope.transaction() as conn:
        row = await conn.fetchrow(UNSUBSCRIBED, recipient_id)
        if row is None:
            return False
        await set_consent(conn, row["contact_id"], "email", "revoked", source)
    return True
