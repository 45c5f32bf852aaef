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
from api.contacts.service import contact_by_phone, emit_created
from api.conversations import queries, statuses
from tenancy import phone_directory
from tenancy.scope import TenantScope

log = logging.getLogger("switchboard.conversations.inbound")

SUB_ACCOUNT_KEPT = """
SELECT EXISTS (SELECT 1 FROM control.sub_accounts WHERE id = $1 AND status <> 'deleted')
"""


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
            return Received(queries.message_view(known), known["contact_id"], duplicate=True)
        contact_id, new_contact = await contact_by_phone(conn, text.from_number, "inbound_sms")
        message_id = await conn.fetchval(
            queries.INSERT_INBOUND, contact_id, text.body, text.provider_message_id, text.to_number
        )
        if message_id is None:  # a concurrent repeat committed first
            known = await conn.fetchrow(queries.SELECT_INBOUND, text.provider_message_id)
            return Received(queries.message_view(known), known["contact_id"], duplicate=True)
        message = queries.message_view(await conn.fetchrow(queries.SELECT_MESSAGE, message_id))
        # Events last: emitting holds the tenant's event stream until commit (api/events.py).
        if new_contact:
            await emit_created(conn, scope.sub_account_id, contact_id)
        await apply_inbound_keyword(conn, contact_id, text.body)
        await events.emit(
            conn, "message.received", {"sub_account_id": scope.sub_account_id, "message": message}
        )
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


@dataclass(frozen=True)
class TwilioStatusReport:
    """Twilio's status callback form, as it came: its words, not ours yet."""

    message_sid: str
    message_status: str
    from_number: str
    error_code: str | None


async def record_twilio_status(
    pool: asyncpg.Pool, report: TwilioStatusReport, reference: str | None
) -> bool:
    """Twilio's status callback for a message we sent: True when the message's
    delivery_status moved (and message.status_updated was emitted).

    The sub-account is the one our StatusCallback URL named (`reference`, under Twilio's
    signature), else the holder of the sender number `From` (callbacks asked for before the
    URL named it). Unknown statuses and sub-accounts, and late, repeated or backward reports,
    change nothing; a report on a message id not stored yet is kept for its send
    (api/conversations/statuses.py)."""
    status = statuses.TWILIO_STATUSES.get(report.message_status.lower())
    sid, error = report.message_sid, report.error_code
    if status is None or not 0 < len(sid) <= 200:
        return False
    scope = await _reporting_scope(pool, reference, report.from_number)
    if scope is None:
        return False
    async with scope.transaction() as conn:
        return await statuses.report(
            conn,
            scope.sub_account_id,
            sid,
            status,
            f"carrier error {error[:50]}" if error else None,
        )


async def _reporting_scope(
    pool: asyncpg.Pool, reference: str | None, sender: str
) -> TenantScope | None:
    if reference:
        try:
            sub_account_id = uuid.UUID(reference)
        except ValueError:
            return None
        # A message already sent keeps its facts while the sub-account is suspended.
        if not await pool.fetchval(SUB_ACCOUNT_KEPT, sub_account_id):
            return None
        return TenantScope.of_sub_account(pool, sub_account_id)
    holder = await phone_directory.holder(pool, sender) if sender else None
    return holder.scope(pool) if holder is not None else None
