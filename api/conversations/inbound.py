"""Texts and delivery reports from carriers: inbound SMS join the sender's conversation, status
callbacks move an outbound message's delivery_status forward (CONTRACT 7, 9).

The sandbox names the sub-account in its webhook's path; Twilio's `To` (inbound) or `From`
(status) is one of our numbers, whose holder the platform-wide directory knows. Each change is
written with its event (`message.received`, `message.status_updated`) in one transaction.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from api import events
from api.consent.service import apply_inbound_keyword
from api.contacts.service import emit_created
from api.conversations import queries
from api.conversations.service import message_view
from tenancy import phone_directory
from tenancy.scope import TenantScope

log = logging.getLogger("switchboard.conversations.inbound")

# Carrier statuses as ours; the rank says which may follow which (forward only).
TWILIO_STATUSES = {"accepted": "queued", "scheduled": "queued", "queued": "queued",
                   "sending": "sent", "sent": "sent", "delivered": "delivered",
                   "read": "delivered", "undelivered": "undelivered", "failed": "failed",
                   "canceled": "failed"}
RANK = {"queued": 0, "sent": 1, "delivered": 2, "undelivered": 2, "failed": 2}


@dataclass(frozen=True)
class InboundText:
    from_number: str
    to_number: str | None
    body: str
    provider_message_id: str


@dataclass(frozen=True)
class Received:
    message: dict[str, Any]
    contact_id: uuid.UUID
    duplicate: bool


async def receive(scope: TenantScope, text: InboundText) -> Received:
    """An inbound text for the sub-account (the sandbox's webhook names it; Twilio's `To`
    number is held by it): it joins the sender's conversation (a new contact when unknown),
    once per provider message id: a retried or concurrent repeat finds the first and writes
    nothing."""
    async with scope.transaction() as conn:
        known = await conn.fetchrow(queries.SELECT_INBOUND, text.provider_message_id)
        if known is not None:
            return Received(message_view(known), known["contact_id"], duplicate=True)
        sender = await conn.fetchrow(queries.UPSERT_CONTACT_BY_PHONE, text.from_number)
        contact_id = sender["id"]
        if sender["created"]:
            await emit_created(conn, scope.sub_account_id, contact_id)
        message_id = await conn.fetchval(queries.INSERT_INBOUND, contact_id, text.body,
                                         text.provider_message_id, text.to_number)
        if message_id is None:  # a concurrent repeat committed first
            known = await conn.fetchrow(queries.SELECT_INBOUND, text.provider_message_id)
            return Received(message_view(known), known["contact_id"], duplicate=True)
        message = message_view(await conn.fetchrow(queries.SELECT_MESSAGE, message_id))
        await apply_inbound_keyword(conn, contact_id, text.body)
        await events.emit(conn, "message.received",
                          {"sub_account_id": scope.sub_account_id, "message": message})
    return Received(message, contact_id, duplicate=False)


async def receive_twilio(pool: asyncpg.Pool, text: InboundText) -> Received | None:
    """Twilio's inbound text to our number `To`; None (nothing stored) when no active
    sub-account holds that number."""
    if text.to_number is None:
        return None
    holder = await phone_directory.holder(pool, text.to_number)
    if holder is None or not holder.active:
        log.warning("inbound sms to %s: no active sub-account holds it", text.to_number)
        return None
    return await receive(holder.scope(pool), text)


async def record_twilio_status(pool: asyncpg.Pool, fields: dict[str, str]) -> bool:
    """Twilio's status callback for a message we sent from our number `From`: True when the
    message's delivery_status moved (and message.status_updated was emitted). Unknown
    messages, statuses and numbers, and late, repeated or backward reports, change nothing."""
    status = TWILIO_STATUSES.get(fields.get("MessageStatus", "").lower())
    sid, sender = fields.get("MessageSid", ""), fields.get("From", "")
    if status is None or not sid or not sender:
        return False
    holder = await phone_directory.holder(pool, sender)
    if holder is None:
        return False
    before = [name for name, rank in RANK.items() if rank < RANK[status]]
    error = fields.get("ErrorCode") or None
    async with holder.scope(pool).transaction() as conn:
        message_id = await conn.fetchval(queries.ADVANCE_STATUS, sid, status, before,
                                         f"carrier error {error}" if error else None)
        if message_id is None:
            return False
        message = message_view(await conn.fetchrow(queries.SELECT_MESSAGE, message_id))
        await events.emit(conn, "message.status_updated",
                          {"sub_account_id": holder.sub_account_id, "message": message})
    return True
