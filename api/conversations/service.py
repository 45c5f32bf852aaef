"""Conversations: one per contact, the messages in it, and sending one message to a contact.

POST /contacts/{id}/messages appends with `append_message`. A message to a contact is charged and
written (queued) in one transaction, sent, then marked sent, or failed and refunded: the wallet
lock is never held while a provider is talking. An SMS goes from one of the sub-account's own
numbers (queries.SELECT_SENDER_NUMBER). Inbound texts and carrier callbacks are in inbound.py.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from email.message import EmailMessage
from typing import Any

import asyncpg

from api.consent.service import ensure_allowed
from api.conversations import queries, statuses
from api.conversations.sms import SmsError, sms_provider
from api.wallet import service as wallet
from integrations.email import (
    EmailDeliveryError,
    SMTPConfig,
    UnsafeHeader,
    build_message,
    send_email,
)
from tenancy.clock import utcnow
from tenancy.db import fetch_one_or_404
from tenancy.due import cancel_due, schedule_due
from tenancy.errors import APIError, not_found
from tenancy.invitations import email_config_for
from tenancy.scope import TenantScope

PRICE_KEYS = {"email": "email_per_message", "sms": "sms_per_message"}
# The most characters an SMS the product sends may have (CONTRACT 18a).
MAX_SMS = 1_600
# The due work of a scheduled message (ref: the message id), run by tasks.send_scheduled_message.
MESSAGE_SEND_WORK = "message_send"

SELECT_CONTACT = "SELECT id, name, email, phone FROM contacts WHERE id = $1"

SELECT_CONTACT_AND_CONVERSATION = """
SELECT c.id, c.name, c.email, c.phone, v.id AS conversation_id
FROM contacts AS c LEFT JOIN conversations AS v ON v.contact_id = c.id
WHERE c.id = $1
"""

SELECT_MESSAGES = """
SELECT id, content, sender_type, message_type, created_at AS timestamp
FROM messages WHERE conversation_id = $1
ORDER BY created_at DESC, seq DESC
LIMIT $2 OFFSET $3
"""

COUNT_MESSAGES = "SELECT count(*) FROM messages WHERE conversation_id = $1"

MARK_SENT = """
UPDATE messages SET status = 'sent', provider_message_id = $2, updated_at = now()
WHERE id = $1 AND status = 'queued'
"""

MARK_FAILED = """
UPDATE messages SET status = 'failed', error = $2, updated_at = now() WHERE id = $1
"""


async def message_price(scope: TenantScope, channel: str) -> Decimal:
    """The sub-account's rebilled price of one message on `channel` (0 when unset)."""
    return await wallet.plan_price(scope, PRICE_KEYS[channel])


async def append_message(
    conn: asyncpg.Connection,
    contact_id: uuid.UUID,
    *,
    direction: str,
    sender_type: str,
    message_type: str,
    content: str,
    status: str,
    subject: str | None = None,
    campaign_id: uuid.UUID | None = None,
    provider_message_id: str | None = None,
    message_id: uuid.UUID | None = None,
    phone_number: str | None = None,
    send_at: datetime | None = None,
) -> None:
    """Add a message to the contact's conversation, starting the conversation if need be."""
    await conn.execute(
        queries.APPEND_MESSAGE,
        contact_id,
        message_id or uuid.uuid4(),
        direction,
        sender_type,
        message_type,
        subject,
        content,
        status,
        campaign_id,
        provider_message_id,
        phone_number,
        send_at,
    )


# --- reading ----------------------------------------------------------------------------------


async def contact_messages(
    scope: TenantScope, contact_id: uuid.UUID, limit: int, offset: int
) -> dict[str, Any]:
    async with scope.transaction() as conn:
        contact = await fetch_one_or_404(
            conn, SELECT_CONTACT_AND_CONVERSATION, contact_id, what="contact"
        )
        if contact["conversation_id"] is None:
            raise not_found("conversation")
        rows = await conn.fetch(SELECT_MESSAGES, contact["conversation_id"], limit, offset)
        total = await conn.fetchval(COUNT_MESSAGES, contact["conversation_id"])
    return {
        "contact_id": contact["id"],
        "contact": {"name": contact["name"], "email": contact["email"], "phone": contact["phone"]},
        "conversation_id": contact["conversation_id"],
        "messages": [dict(row) for row in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


# --- sending one message ----------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    message_type: str
    content: str
    subject: str | None


async def send_to_contact(
    scope: TenantScope,
    organisation_id: uuid.UUID,
    contact_id: uuid.UUID,
    outgoing: Outgoing,
    *,
    message_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Build, charge, record (queued), send, then mark sent. The message is built before the
    charge (a message that cannot be built is 400 and costs nothing); once charged, any failure
    marks it failed and refunds the charge before the error goes on. A job that must send at
    most once passes its own stable `message_id` and looks for that message before sending."""
    message_id = message_id or uuid.uuid4()
    price = await message_price(scope, outgoing.message_type)
    config = await _email_config(scope, organisation_id, outgoing)
    try:
        async with scope.transaction() as conn:
            envelope = await _ready(conn, config, contact_id, outgoing, message_id)
            await _charge(conn, price, outgoing.message_type, message_id)
            await _append_outgoing(
                conn, contact_id, outgoing, message_id, "queued", phone_number=envelope.from_number
            )
    except wallet.InsufficientFunds:
        await wallet.record_declined(
            scope,
            price,
            f"{outgoing.message_type}_message",
            "message to a contact",
            "message",
            message_id,
        )
        raise
    provider_id = await _deliver_or_refund(scope, envelope, message_id, price)
    return await _mark_sent(scope, message_id, provider_id, outgoing.message_type)


async def _append_outgoing(
    conn: asyncpg.Connection,
    contact_id: uuid.UUID,
    outgoing: Outgoing,
    message_id: uuid.UUID,
    status: str,
    *,
    phone_number: str | None = None,
    send_at: datetime | None = None,
) -> None:
    await append_message(
        conn,
        contact_id,
        direction="outbound",
        sender_type="agent",
        message_type=outgoing.message_type,
        content=outgoing.content,
        subject=outgoing.subject,
        status=status,
        message_id=message_id,
        phone_number=phone_number,
        send_at=send_at,
    )


async def _email_config(
    scope: TenantScope, organisation_id: uuid.UUID, outgoing: Outgoing
) -> SMTPConfig | None:
    if outgoing.message_type != "email":
        return None
    return await email_config_for(scope.pool, organisation_id)


async def _ready(
    conn: asyncpg.Connection,
    config: SMTPConfig | None,
    contact_id: uuid.UUID,
    outgoing: Outgoing,
    message_id: uuid.UUID,
) -> Envelope:
    """The message built for its provider under POST /contacts/{id}/messages's rules: a contact
    of the sub-account (404) that allows the channel (409) and has an address (400), from the
    conversation's sender number. Raises APIError, having written nothing."""
    contact = await fetch_one_or_404(conn, SELECT_CONTACT, contact_id, what="contact")
    await ensure_allowed(conn, contact_id, outgoing.message_type)
    sender = (
        await conn.fetchval(queries.SELECT_SENDER_NUMBER, contact_id)
        if outgoing.message_type == "sms"
        else None
    )
    return _envelope(config, _address(contact, outgoing.message_type), outgoing, message_id, sender)


async def _charge(
    conn: asyncpg.Connection, price: Decimal, message_type: str, message_id: uuid.UUID
) -> None:
    if price > 0:
        await wallet.debit(
            conn, price, f"{message_type}_message", "message to a contact", "message", message_id
        )


async def _mark_sent(
    scope: TenantScope, message_id: uuid.UUID, provider_id: str, message_type: str
) -> dict[str, Any]:
    async with scope.transaction() as conn:
        await conn.execute(MARK_SENT, message_id, provider_id)
        if message_type == "sms":
            await statuses.apply_early_reports(conn, scope.sub_account_id, provider_id)
        row = await conn.fetchrow(queries.SELECT_MESSAGE, message_id)
    return queries.message_view(row)


# --- a message sent later (CONTRACT 10) -------------------------------------------------------


async def schedule_to_contact(
    scope: TenantScope,
    organisation_id: uuid.UUID,
    contact_id: uuid.UUID,
    outgoing: Outgoing,
    send_at: datetime,
) -> dict[str, Any]:
    """Keep the message `scheduled` in the contact's conversation and its due work at
    `send_at`, when `send_scheduled` charges and sends it. Refused now as a message sent now
    would be (contact, consent, address, an email that cannot be built); nothing is charged."""
    message_id = uuid.uuid4()
    config = await _email_config(scope, organisation_id, outgoing)
    async with scope.transaction() as conn:
        await _ready(conn, config, contact_id, outgoing, message_id)
        await _append_outgoing(conn, contact_id, outgoing, message_id, "scheduled", send_at=send_at)
        await schedule_due(conn, scope.sub_account_id, MESSAGE_SEND_WORK, message_id, send_at)
        row = await conn.fetchrow(queries.SELECT_MESSAGE, message_id)
    return queries.message_view(row)


async def send_scheduled(
    scope: TenantScope, organisation_id: uuid.UUID, message_id: uuid.UUID
) -> datetime | None:
    """The due run of a scheduled message: at its time, under POST /contacts/{id}/messages's
    rules as they stand then, charge it and mark it `queued` (one transaction, the message row
    locked, so a cancel goes first or finds it started), then send it with its own id as the
    provider's message id and mark it sent. A refusal then (consent revoked, no funds) leaves
    it `failed` with the code as its error and nothing charged. A message a run charged and
    did not record as sent (a worker killed mid-send) is sent again with the same id. Returns
    when to look again, or None once settled."""
    async with scope.transaction() as conn:
        message = await conn.fetchrow(queries.LOCK_OUTBOUND, message_id)
        if message is None or message["send_at"] is None:
            return None
        send_at: datetime = message["send_at"]
        if message["status"] == "scheduled" and send_at > utcnow():
            return send_at
        if message["status"] not in ("scheduled", "queued"):
            return None
        outgoing = Outgoing(message["message_type"], message["content"], message["subject"])
        price = await message_price(scope, outgoing.message_type)
        config = await _email_config(scope, organisation_id, outgoing)
        try:
            envelope = await _taken(conn, config, message, outgoing, price)
        except APIError as exc:
            if message["status"] == "scheduled":
                await conn.execute(queries.MARK_REFUSED, message_id, exc.code)
                return None
            envelope = None
    if envelope is None:
        await _fail(scope, message_id, price, "not sent: the contact has no address any more")
        return None
    try:
        provider_id = await _deliver(scope, envelope)
    except (EmailDeliveryError, SmsError) as exc:
        await _fail(scope, message_id, price, str(exc))
        return None
    await _mark_sent(scope, message_id, provider_id, outgoing.message_type)
    return None


async def send_queued(
    scope: TenantScope, organisation_id: uuid.UUID, message_id: uuid.UUID
) -> str | None:
    """Send again a message that a run charged and recorded `queued` but never recorded as
    sent (its worker killed mid-send), with the same id as the provider's message id (a
    provider that got it the first time drops the repeat): marked sent, or failed and refunded
    when it cannot go. Nothing is charged again. The message's status afterwards (None: no
    such outbound message); a message no longer `queued` is left as it is."""
    async with scope.transaction() as conn:
        message = await conn.fetchrow(queries.LOCK_OUTBOUND, message_id)
        if message is None or message["status"] != "queued":
            return None if message is None else str(message["status"])
        outgoing = Outgoing(message["message_type"], message["content"], message["subject"])
        price = await message_price(scope, outgoing.message_type)
        config = await _email_config(scope, organisation_id, outgoing)
        try:
            envelope = await _taken(conn, config, message, outgoing, price)
        except APIError:
            envelope = None
    if envelope is None:
        await _fail(scope, message_id, price, "not sent: the contact has no address any more")
        return "failed"
    try:
        provider_id = await _deliver(scope, envelope)
    except (EmailDeliveryError, SmsError) as exc:
        await _fail(scope, message_id, price, str(exc))
        return "failed"
    await _mark_sent(scope, message_id, provider_id, outgoing.message_type)
    return "sent"


async def _taken(
    conn: asyncpg.Connection,
    config: SMTPConfig | None,
    message: asyncpg.Record,
    outgoing: Outgoing,
    price: Decimal,
) -> Envelope:
    """The envelope of a due message: a `scheduled` one checked and charged now (APIError when
    refused, nothing charged), a `queued` one (charged by an earlier run) rebuilt as it was."""
    if message["status"] == "scheduled":
        envelope = await _ready(conn, config, message["contact_id"], outgoing, message["id"])
        await _charge(conn, price, outgoing.message_type, message["id"])
        await conn.execute(queries.MARK_DUE, message["id"], envelope.from_number)
        return envelope
    contact = await conn.fetchrow(SELECT_CONTACT, message["contact_id"])
    return _envelope(
        config,
        _address(contact, outgoing.message_type),
        outgoing,
        message["id"],
        message["phone_number"],
    )


async def cancel_message(scope: TenantScope, message_id: uuid.UUID) -> dict[str, Any]:
    """Cancel a scheduled message before its run takes it: 200 `cancelled`; 409
    `not_cancellable` once it is on its way or settled."""
    async with scope.transaction() as conn:
        message = await fetch_one_or_404(conn, queries.LOCK_ANY, message_id, what="message")
        if message["status"] != "scheduled":
            raise APIError(
                409,
                "not_cancellable",
                f"the message is {message['status']}; only a scheduled message can be cancelled",
            )
        await conn.execute(queries.MARK_CANCELLED, message_id)
        await cancel_due(conn, MESSAGE_SEND_WORK, message_id)
        row = await conn.fetchrow(queries.SELECT_MESSAGE, message_id)
    return queries.message_view(row)


def _address(contact: asyncpg.Record, message_type: str) -> str:
    if message_type == "email":
        if not contact["email"]:
            raise APIError(400, "contact_has_no_email", "the contact has no email address")
        return str(contact["email"])
    if not contact["phone"]:
        raise APIError(400, "contact_has_no_phone", "the contact has no phone number")
    return str(contact["phone"])


@dataclass(frozen=True)
class Envelope:
    """A message ready for its provider: an email already built, or a text and its number."""

    address: str
    header_id: str
    email: tuple[SMTPConfig, EmailMessage] | None = None
    text: str = ""
    # An SMS's sender: one of the sub-account's numbers, or None for the provider's default.
    from_number: str | None = None


def _envelope(
    config: SMTPConfig | None,
    address: str,
    outgoing: Outgoing,
    message_id: uuid.UUID,
    from_number: str | None = None,
) -> Envelope:
    header_id = f"<{message_id}@switchboard>"
    if outgoing.message_type == "sms" and len(outgoing.content) > MAX_SMS:
        # Each sender bounds its own text first; this holds for every one of them.
        raise APIError(400, "validation_error", f"an sms is at most {MAX_SMS} characters")
    if config is None:
        return Envelope(address, header_id, text=outgoing.content, from_number=from_number)
    try:
        message = build_message(
            config,
            address,
            outgoing.subject or "(no subject)",
            outgoing.content,
            message_id=header_id,
        )
    except UnsafeHeader as exc:
        raise APIError(400, "validation_error", str(exc)) from None
    return Envelope(address, header_id, email=(config, message))


async def _deliver(scope: TenantScope, envelope: Envelope) -> str:
    """Hand the message to its provider; its id there (an email's own Message-ID)."""
    if envelope.email is None:
        return await sms_provider().send_sms(
            envelope.address,
            envelope.text,
            envelope.header_id,
            envelope.from_number,
            str(scope.sub_account_id),
        )
    await send_email(*envelope.email)
    return envelope.header_id


async def _deliver_or_refund(
    scope: TenantScope, envelope: Envelope, message_id: uuid.UUID, price: Decimal
) -> str:
    try:
        return await _deliver(scope, envelope)
    except (EmailDeliveryError, SmsError) as exc:
        await _fail(scope, message_id, price, str(exc))
        if isinstance(exc, EmailDeliveryError):
            raise APIError(
                502,
                "email_delivery_failed",
                "the email server did not accept the message; the charge was refunded",
            ) from None
        raise APIError(
            502,
            "provider_error",
            "the SMS provider did not accept the message; the charge was refunded",
        ) from None
    except BaseException as exc:
        # Not a refusal we know (a bug, a cancelled task): the charge must not stay posted.
        await asyncio.shield(_fail(scope, message_id, price, f"not sent: {type(exc).__name__}"))
        raise


async def _fail(scope: TenantScope, message_id: uuid.UUID, price: Decimal, error: str) -> None:
    async with scope.transaction() as conn:
        await conn.execute(MARK_FAILED, message_id, error[:500])
        if price > 0:
            await wallet.credit(
                conn,
                price,
                "message_refund",
                "message not accepted by provider",
                "message",
                message_id,
            )
