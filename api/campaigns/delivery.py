"""Sending a campaign: claim recipients, charge, send, record, each recipient exactly once.

One run of `run_campaign` holds a session advisory lock on the campaign (on a connection of its
own, so a crashed worker's lock dies with its connection), which makes it the only sender of that
campaign. Inside a run, several senders work in parallel, each with its own SMTP connection:

1. claim (one short transaction): lock up to `batch_size` pending recipients with
   `FOR UPDATE SKIP LOCKED`, debit the wallet once per recipient not charged before, mark them
   `sending` with the amount charged. A recipient the wallet cannot cover is left pending and the
   campaign is paused with the reason.
2. send each one to the provider, with a stable Message-ID per recipient.
3. record (one transaction per recipient): `sent`, and the message appended to the contact's
   conversation; or `failed` with a refund when the provider refused that recipient for good.

A run that starts finds any `sending` recipient left by a crashed run (it holds the lock, so no
live sender owns them) and sends it again, charged already, with the same Message-ID: the only
window for a repeat is between the provider accepting a message and step 3 committing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg

from api.campaigns import business_hours
from api.campaigns.content import message_id, render
from api.campaigns.mime import CampaignHeaders, message_bytes
from api.campaigns.queries import MARK_MATERIALISED, MATERIALISE, PAUSE, START
from api.campaigns.service import complete_if_done
from api.conversations.queries import SELECT_SENDER_NUMBER
from api.conversations.service import message_price
from api.conversations.sms import SmsError, sms_provider
from api.conversations.statuses import apply_early_reports
from api.wallet import service as wallet
from integrations.email import (
    EmailRefused,
    EmailServerUnavailable,
    SMTPConfig,
    SmtpSession,
    UnsafeHeader,
)
from tenancy.clock import utcnow
from tenancy.db import asyncpg_dsn, session_url
from tenancy.invitations import email_config_for
from tenancy.scope import TenantScope
from tenancy.settings import Settings, get_settings

log = logging.getLogger("switchboard.campaigns")

LOCK_NAMESPACE = 0x43414D50  # "CAMP"
BUSY_RETRY = timedelta(seconds=5)

SELECT_SUB_ACCOUNT = """
SELECT organisation_id FROM control.sub_accounts WHERE id = $1 AND status = 'active'
"""

SELECT_FOR_START = """
SELECT id, name, campaign_type, status, subject, message_content, contact_ids, smart_list_id,
       start_date, business_hours_enabled, business_hours_config, recipients_materialised_at
FROM campaigns WHERE id = $1
FOR UPDATE
"""


DEFER = """
UPDATE campaigns
SET status = 'scheduled', start_date = $2, version = version + 1, updated_at = now()
WHERE id = $1 AND status IN ('scheduled', 'sending')
"""


RESET_ORPHANS = """
UPDATE campaign_recipients SET state = 'pending'
WHERE campaign_id = $1 AND state = 'sending'
"""

SELECT_STATUS = "SELECT status FROM campaigns WHERE id = $1"

# Claims only while the campaign is sending: a pause or deferral stops every sender.
CLAIM = """
WITH claimed AS (
    SELECT id, contact_id, charged_amount FROM campaign_recipients
    WHERE campaign_id = $1 AND state = 'pending'
      AND EXISTS (SELECT 1 FROM campaigns WHERE id = $1 AND status = 'sending')
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
SELECT claimed.id, claimed.contact_id, claimed.charged_amount, c.email, c.phone,
       EXISTS (SELECT 1 FROM contact_consents AS k
               WHERE k.contact_id = claimed.contact_id AND k.channel = $3
                 AND k.status = 'revoked') AS opted_out
FROM claimed JOIN contacts AS c ON c.id = claimed.contact_id
"""

MARK_SENDING = """
UPDATE campaign_recipients
SET state = 'sending', charged_amount = COALESCE(charged_amount, $2), attempts = attempts + 1,
    claimed_at = now()
WHERE id = ANY($1::uuid[])
"""

MARK_SKIPPED = """
UPDATE campaign_recipients AS r SET state = 'skipped', error = s.reason, claimed_at = now()
FROM unnest($1::uuid[], $2::text[]) AS s(id, reason)
WHERE r.id = s.id
"""


# One statement: the recipient is sent and the message joins the contact's conversation.
RECORD_SENT = """
WITH updated AS (
    UPDATE campaign_recipients
    SET state = 'sent', sent_at = now(), provider_message_id = $3, message_id = $7, error = NULL
    WHERE id = $1 AND state = 'sending'
    RETURNING contact_id
), conversation AS (
    INSERT INTO conversations (contact_id, last_message_at)
    SELECT contact_id, now() FROM updated
    ON CONFLICT (sub_account_id, contact_id)
    DO UPDATE SET last_message_at = now(), updated_at = now()
    RETURNING id
)
INSERT INTO messages
    (conversation_id, direction, sender_type, message_type, subject, content, status,
     campaign_id, provider_message_id, phone_number)
SELECT id, 'outbound', 'agent', $2, $4, $5, 'sent', $6, $3, $8 FROM conversation
RETURNING id
"""

RECORD_FAILED = """
UPDATE campaign_recipients SET state = 'failed', error = $2
WHERE id = $1 AND state = 'sending'
RETURNING charged_amount
"""

RELEASE = "UPDATE campaign_recipients SET state = 'pending' WHERE id = $1 AND state = 'sending'"


WORK_LEFT = """
SELECT EXISTS (SELECT 1 FROM campaign_recipients
               WHERE campaign_id = $1 AND state IN ('pending', 'sending'))
"""


class PermanentFailure(Exception):
    """The provider refused this recipient for good."""


class ProviderUnavailable(Exception):
    """The provider cannot take messages now (down, refusing our sender, bad credentials)."""


@dataclass
class Claimed:
    id: uuid.UUID
    contact_id: uuid.UUID
    address: str


@dataclass
class Run:
    scope: TenantScope
    campaign: dict[str, Any]
    price: Decimal
    smtp: SMTPConfig | None
    headers: CampaignHeaders | None
    hours: business_hours.BusinessHours | None
    settings: Settings
    deadline: float
    halted: str | None = None
    sent: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def campaign_id(self) -> uuid.UUID:
        return self.campaign["id"]  # type: ignore[no-any-return]

    @property
    def channel(self) -> str:
        return self.campaign["campaign_type"]  # type: ignore[no-any-return]

    def halt(self, why: str) -> None:
        if self.halted is None:
            self.halted = why
        self.stop.set()


def lock_key(campaign_id: uuid.UUID) -> int:
    return int.from_bytes(campaign_id.bytes[:4], "big", signed=True)


async def run_campaign(
    scope: TenantScope, database_url: str, campaign_id: uuid.UUID, settings: Settings | None = None
) -> datetime | None:
    """Send what is due of one campaign; return when to run again, or None when nothing is left.

    Safe to call any number of times at once: only the holder of the campaign's lock sends.
    """
    settings = settings or get_settings()
    sub_account = await scope.pool.fetchrow(SELECT_SUB_ACCOUNT, scope.sub_account_id)
    if sub_account is None:
        return None
    # A session lock needs a session: not PgBouncer in transaction mode.
    lock = await asyncpg.connect(asyncpg_dsn(session_url(database_url)))
    try:
        if not await lock.fetchval(
            "SELECT pg_try_advisory_lock($1, $2)", LOCK_NAMESPACE, lock_key(campaign_id)
        ):
            return utcnow() + BUSY_RETRY
        try:
            return await _run_locked(scope, sub_account["organisation_id"], campaign_id, settings)
        finally:
            await lock.execute(
                "SELECT pg_advisory_unlock($1, $2)", LOCK_NAMESPACE, lock_key(campaign_id)
            )
    finally:
        await lock.close()


async def _run_locked(
    scope: TenantScope, organisation_id: uuid.UUID, campaign_id: uuid.UUID, settings: Settings
) -> datetime | None:
    started = await _start(scope, campaign_id)
    if not isinstance(started, dict):
        return started
    smtp = (
        await email_config_for(scope.pool, organisation_id)
        if started["campaign_type"] == "email"
        else None
    )
    run = Run(
        scope=scope,
        campaign=started,
        price=await message_price(scope, started["campaign_type"]),
        smtp=smtp,
        headers=CampaignHeaders.of(smtp.from_address, started["subject"], campaign_id)
        if smtp is not None
        else None,
        hours=_hours(started["business_hours_enabled"], started["business_hours_config"]),
        settings=settings,
        deadline=time.monotonic() + settings.campaign_slice_seconds,
    )
    # A sender that fails cancels the others before the lock is given up: no run ever overlaps
    # another's live senders.
    async with asyncio.TaskGroup() as senders:
        for _ in range(settings.campaign_concurrency):
            senders.create_task(_sender(run))
    return await _finish(run)


def _hours(enabled: bool, config: dict[str, Any] | None) -> business_hours.BusinessHours | None:
    """The campaign's hours, parsed from its stored business_hours_config (JSON, checked and
    normalised when it was written), or None when it may send at any time."""
    if enabled and config:
        return business_hours.parse(config)
    return None


async def _start(scope: TenantScope, campaign_id: uuid.UUID) -> dict[str, Any] | datetime | None:
    """Move a due campaign to sending and fix its recipients; else when to look again."""
    async with scope.transaction() as conn:
        row = await conn.fetchrow(SELECT_FOR_START, campaign_id)
        if row is None or row["status"] not in ("scheduled", "sending"):
            return None
        now = utcnow()
        if row["status"] == "scheduled" and row["start_date"] > now:
            return row["start_date"]  # type: ignore[no-any-return]
        hours = _hours(row["business_hours_enabled"], row["business_hours_config"])
        if hours is not None and not hours.is_open(now):
            opening = hours.next_opening(now)
            await conn.execute(DEFER, campaign_id, opening)
            return opening
        await conn.execute(START, campaign_id)
        if row["recipients_materialised_at"] is None:
            await conn.execute(MATERIALISE, campaign_id, row["contact_ids"], row["smart_list_id"])
            await conn.execute(MARK_MATERIALISED, campaign_id)
        else:
            await conn.execute(RESET_ORPHANS, campaign_id)
    return dict(row)


async def _finish(run: Run) -> datetime | None:
    if run.halted == "out_of_hours" and run.hours is not None:
        opening = run.hours.next_opening(utcnow())
        async with run.scope.transaction() as conn:
            await conn.execute(DEFER, run.campaign_id, opening)
        return opening
    if run.halted == "provider_down":
        return utcnow() + timedelta(seconds=run.settings.campaign_provider_retry_seconds)
    if run.halted in ("paused", "stopped"):
        return None
    async with run.scope.transaction() as conn:
        if await complete_if_done(conn, run.scope.sub_account_id, run.campaign_id):
            log.info("campaign %s completed", run.campaign_id)
            return None
        left = await conn.fetchval(WORK_LEFT, run.campaign_id)
    # Out of time with work left: hand over to the next run at once (it also re-sends any
    # recipient a failed sender left claimed).
    return utcnow() if left else None


# --- one sender -------------------------------------------------------------------------------


async def _sender(run: Run) -> None:
    session = SmtpSession(run.smtp) if run.smtp is not None else None
    try:
        while not run.stop.is_set():
            if time.monotonic() >= run.deadline:
                run.halt("deadline")
                break
            if run.hours is not None and not run.hours.is_open(utcnow()):
                run.halt("out_of_hours")
                break
            batch = await _claim(run)
            if batch is None:
                break
            # Every claimed recipient is paid for: send the whole batch even when halted.
            for item in batch:
                await _deliver(run, session, item)
    finally:
        if session is not None:
            await session.close()


async def _claim(run: Run) -> list[Claimed] | None:
    """The next recipients to send to (possibly none, all skipped); None when none are left."""
    channel = run.channel
    async with run.scope.transaction() as conn:
        rows = await conn.fetch(CLAIM, run.campaign_id, run.settings.campaign_batch_size, channel)
        if not rows:
            if await conn.fetchval(SELECT_STATUS, run.campaign_id) != "sending":
                run.halt("stopped")
            return None
        batch: list[Claimed] = []
        skipped: list[tuple[uuid.UUID, str]] = []
        for row in rows:
            address = row["email"] if channel == "email" else row["phone"]
            if row["opted_out"]:
                skipped.append((row["id"], "opted_out"))
            elif not address:
                skipped.append((row["id"], "no email" if channel == "email" else "no phone"))
            elif row["charged_amount"] is not None or await _charge(conn, run, row["id"]):
                batch.append(Claimed(row["id"], row["contact_id"], address))
            else:
                break
        if batch:
            await conn.execute(MARK_SENDING, [item.id for item in batch], run.price)
        if skipped:
            await conn.execute(MARK_SKIPPED, [s[0] for s in skipped], [s[1] for s in skipped])
    return batch


async def _charge(conn: asyncpg.Connection, run: Run, recipient_id: uuid.UUID) -> bool:
    """Debit one message; on a balance that cannot cover it, pause the campaign instead."""
    if run.price <= 0:
        return True
    try:
        await wallet.debit(
            conn,
            run.price,
            f"campaign_{run.channel}",
            f"campaign {run.campaign['name']}",
            "campaign_recipient",
            recipient_id,
        )
    except wallet.InsufficientFunds as refused:
        await conn.execute(
            PAUSE,
            run.campaign_id,
            f"insufficient_funds: the wallet balance ({refused.balance}) cannot "
            f"cover the next message ({run.price})",
        )
        run.halt("paused")
        return False
    return True


async def _deliver(run: Run, session: SmtpSession | None, item: Claimed) -> None:
    stable_id = message_id(run.campaign_id, item.contact_id)
    sender = None
    try:
        if session is not None:
            provider_id = await _send_email(session, item, _email(run, item, stable_id), stable_id)
        else:
            sender = await _sms_sender(run, item)
            provider_id = await _send_sms(run, item, stable_id, sender)
    except (PermanentFailure, UnsafeHeader) as exc:  # UnsafeHeader: an address unfit for To
        await _record_failed(run, item, str(exc))
        return
    except ProviderUnavailable as exc:
        await _release_for_retry(run, item, str(exc))
        return
    async with run.scope.transaction() as conn:
        await conn.execute(
            RECORD_SENT,
            item.id,
            run.channel,
            provider_id,
            run.campaign["subject"],
            run.campaign["message_content"],
            run.campaign_id,
            stable_id,
            sender,
        )
        if run.channel == "sms":
            await apply_early_reports(conn, run.scope.sub_account_id, provider_id)
    run.sent += 1


def _email(run: Run, item: Claimed, stable_id: str) -> bytes:
    assert run.headers is not None
    rendered = render(run.campaign["message_content"], run.scope.sub_account_id, item.id)
    return message_bytes(
        run.headers, item.address, stable_id, rendered.text, rendered.html, rendered.unsubscribe_url
    )


async def _send_email(session: SmtpSession, item: Claimed, data: bytes, stable_id: str) -> str:
    try:
        return await session.send(item.address, data, stable_id)
    except EmailRefused as exc:
        raise PermanentFailure(str(exc)) from exc
    except EmailServerUnavailable as exc:
        raise ProviderUnavailable(str(exc)) from exc


async def _sms_sender(run: Run, item: Claimed) -> str | None:
    """One of the sub-account's numbers, as for a single message (CONTRACT 9)."""
    async with run.scope.transaction() as conn:
        sender: str | None = await conn.fetchval(SELECT_SENDER_NUMBER, item.contact_id)
    return sender


async def _send_sms(run: Run, item: Claimed, stable_id: str, sender: str | None) -> str:
    try:
        return await sms_provider().send_sms(
            item.address,
            run.campaign["message_content"],
            stable_id,
            sender,
            str(run.scope.sub_account_id),
        )
    except SmsError as exc:
        raise PermanentFailure(str(exc)) from exc


async def _record_failed(run: Run, item: Claimed, error: str) -> None:
    async with run.scope.transaction() as conn:
        charged = await conn.fetchval(RECORD_FAILED, item.id, error[:500])
        if charged:
            await wallet.credit(
                conn,
                charged,
                f"campaign_{run.channel}_refund",
                "message refused by the provider",
                "campaign_recipient",
                item.id,
            )


async def _release_for_retry(run: Run, item: Claimed, error: str) -> None:
    """Keep the recipient (charged once) for a later run: the campaign stays `sending` and is
    tried again after `provider_retry_seconds` (the due-work row keeps the intent)."""
    async with run.scope.transaction() as conn:
        await conn.execute(RELEASE, item.id)
    log.warning(
        "campaign %s: provider unavailable (%s); retrying later", run.campaign_id, error[:300]
    )
    run.halt("provider_down")
