"""Consent per contact and channel: read it, set it, keep outbound sends to what it allows.

A channel without a row is `unknown`, and sending is allowed. Every change is written with its
`contact.consent_updated` event in the caller's transaction; setting what is already stored
(same status and source) changes nothing and fires nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from api import events
from tenancy.db import fetch_one_or_404
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

CHANNELS = ("sms", "email", "call")
REVOKE_WORDS = frozenset({"stop", "stopall", "unsubscribe", "cancel", "end", "quit"})
GRANT_WORDS = frozenset({"start", "unstop"})

SELECT_CONTACT = "SELECT id FROM contacts WHERE id = $1"

SELECT_CONSENT = """
SELECT channel, status, source, updated_at FROM contact_consents WHERE contact_id = $1
"""

# Returns a row only when the stored status or source changed (or the row is new).
UPSERT_CONSENT = """
INSERT INTO contact_consents (contact_id, channel, status, source) VALUES ($1, $2, $3, $4)
ON CONFLICT (sub_account_id, contact_id, channel) DO UPDATE
SET status = EXCLUDED.status, source = EXCLUDED.source, updated_at = now()
WHERE (contact_consents.status, contact_consents.source)
      IS DISTINCT FROM (EXCLUDED.status, EXCLUDED.source)
RETURNING contact_id
"""

IS_REVOKED = """
SELECT EXISTS (SELECT 1 FROM contact_consents
               WHERE contact_id = $1 AND channel = $2 AND status = 'revoked')
"""

SELECT_SUB_ACCOUNT = "SELECT id FROM control.sub_accounts WHERE schema_name = current_schema()"


async def set_consent(
    conn: asyncpg.Connection, contact_id: uuid.UUID, channel: str, status: str, source: str
) -> bool:
    """Store the channel's consent and fire `contact.consent_updated` if it changed (same
    transaction). True when it changed."""
    if await conn.fetchval(UPSERT_CONSENT, contact_id, channel, status, source) is None:
        return False
    await events.emit(
        conn,
        "contact.consent_updated",
        {
            "sub_account_id": str(await conn.fetchval(SELECT_SUB_ACCOUNT)),
            "contact_id": str(contact_id),
            "channel": channel,
            "status": status,
            "source": source,
        },
    )
    return True


async def apply_inbound_keyword(conn: asyncpg.Connection, contact_id: uuid.UUID, body: str) -> None:
    """An inbound text that is only STOP (or a synonym) revokes sms; START or UNSTOP grants it."""
    word = body.strip().lower()
    if word in REVOKE_WORDS:
        await set_consent(conn, contact_id, "sms", "revoked", "inbound_keyword")
    elif word in GRANT_WORDS:
        await set_consent(conn, contact_id, "sms", "granted", "inbound_keyword")


async def ensure_allowed(conn: asyncpg.Connection, contact_id: uuid.UUID, channel: str) -> None:
    """409 `contact_opted_out` when the contact revoked `channel`."""
    if await conn.fetchval(IS_REVOKED, contact_id, channel):
        raise APIError(
            409,
            "contact_opted_out",
            f"the contact has revoked consent to {channel}; nothing was sent or charged",
        )


def _consent_out(rows: list[asyncpg.Record]) -> dict[str, Any]:
    stored = {row["channel"]: row for row in rows}
    return {
        channel: {"status": row["status"], "source": row["source"], "updated_at": row["updated_at"]}
        if (row := stored.get(channel)) is not None
        else {"status": "unknown", "source": None, "updated_at": None}
        for channel in CHANNELS
    }


async def _read(conn: asyncpg.Connection, contact_id: uuid.UUID) -> dict[str, Any]:
    return _consent_out(await conn.fetch(SELECT_CONSENT, contact_id))


async def get_consent(scope: TenantScope, contact_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        await fetch_one_or_404(conn, SELECT_CONTACT, contact_id, what="contact")
        return await _read(conn, contact_id)


async def put_consent(
    scope: TenantScope, contact_id: uuid.UUID, channel: str, status: str, source: str
) -> dict[str, Any]:
    try:
        async with scope.transaction() as conn:
            await fetch_one_or_404(conn, SELECT_CONTACT, contact_id, what="contact")
            await set_consent(conn, contact_id, channel, status, source)
            return await _read(conn, contact_id)
    except asyncpg.ForeignKeyViolationError:
        # The contact was deleted between the check and the write.
        raise not_found("contact") from None
