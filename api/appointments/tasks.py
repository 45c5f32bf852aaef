"""Appointment reminders (CONTRACT 10 `reminders`, 10a): each reminder of a calendar is sent to
the contact of a booked appointment once, at start minus `minutes_before`, under POST
/contacts/{id}/messages's rules (consent, sender number, charge, conversation).

The plan: booking, rescheduling and cancelling (api/appointments/service.py `_changed`) write
the appointment's `reminders` column in their transaction: one entry per reminder of the
calendar, `{index, at, channel, template, subject, message_id, status, reason}`, with a fresh
message id per entry. An entry whose time has already passed is `skipped`
(`time_passed_at_booking`); the others are `pending`. One due-work row per appointment (kind
APPOINTMENT_REMINDER, ref the appointment id) stands at the earliest pending time; a reschedule
writes a new plan (and moves the row), a cancel drops the row and skips what was pending.

The run (`send_due_reminders`) locks the appointment row for as long as it sends, so a
reschedule or cancel waits for it or goes first: it sends only the pending entries of a booked
appointment whose time has come, as the plan stands under the lock. Each message carries its
entry's message id: a message already recorded under that id (a run that died after sending,
before writing the outcome) is taken as sent, never sent again; one recorded `queued` (a run
that died mid-send, charged, before the provider answered) is sent again under the same id, as
the provider's message id, and not charged again. A refused send (consent
revoked, no phone or email, insufficient funds) is recorded on the entry as `skipped` with the
error code as its reason; a provider failure (refunded) as `failed`.

An SMS reminder's rendered text is cut at 1,600 characters (CONTRACT 18a), as every placeholder's
value is cut at 1,000 by the renderer.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg

from api.agents.context import render
from api.calls.context import context_values
from api.conversations.service import MAX_SMS, Outgoing, send_queued, send_to_contact
from tenancy.clock import iso, utcnow
from tenancy.due import DueWork, cancel_due, schedule_due
from tenancy.errors import APIError
from tenancy.scope import TenantScope

APPOINTMENT_REMINDER = "appointment_reminder"

PAST = "time_passed_at_booking"
CANCELLED = "appointment_cancelled"

WRITE_PLAN = "UPDATE appointments SET reminders = $2 WHERE id = $1"

SELECT_FOR_RUN = """
SELECT a.id, a.status, a.start, a.contact_id, a.reminders, c.name AS calendar_name,
       c.timezone
FROM appointments AS a JOIN calendars AS c ON c.id = a.calendar_id
WHERE a.id = $1
FOR UPDATE OF a
"""

SELECT_CONTACT_VALUES = """
SELECT p.first_name, p.last_name, p.name, p.email, p.phone, p.custom_field_values,
       (SELECT s.name FROM control.sub_accounts AS s WHERE s.schema_name = current_schema())
           AS sub_account_name
FROM contacts AS p WHERE p.id = $1
"""

SELECT_MESSAGE = "SELECT status FROM messages WHERE id = $1"

SELECT_ORGANISATION = "SELECT organisation_id FROM control.sub_accounts WHERE id = $1"


def plan(reminders: list[dict[str, Any]], start: datetime, now: datetime) -> list[dict[str, Any]]:
    """The entries for an appointment starting at `start`, planned at `now`."""
    entries = []
    for index, reminder in enumerate(reminders):
        at = start - timedelta(minutes=int(reminder["minutes_before"]))
        passed = at < now
        entries.append(
            {
                "index": index,
                "at": iso(at),
                "minutes_before": reminder["minutes_before"],
                "channel": reminder["channel"],
                "template": reminder["template"],
                "subject": reminder.get("subject"),
                "message_id": str(uuid.uuid4()),
                "status": "skipped" if passed else "pending",
                "reason": PAST if passed else None,
            }
        )
    return entries


def next_pending(entries: list[dict[str, Any]]) -> datetime | None:
    times = [datetime.fromisoformat(e["at"]) for e in entries if e["status"] == "pending"]
    return min(times) if times else None


async def planned(
    conn: asyncpg.Connection,
    scope: TenantScope,
    row: asyncpg.Record,
    calendar: asyncpg.Record | None,
    now: datetime | None = None,
) -> None:
    """In the transaction that booked, moved or cancelled the appointment `row`: write its
    reminder plan and move (or drop) its due-work row. `calendar` is the appointment's
    calendar row when it was booked or moved."""
    if row["status"] != "booked" or calendar is None:
        current = (
            await conn.fetchval("SELECT reminders FROM appointments WHERE id = $1", row["id"]) or []
        )
        for entry in current:
            if entry["status"] == "pending":
                entry.update(status="skipped", reason=CANCELLED)
        await conn.execute(WRITE_PLAN, row["id"], current)
        await cancel_due(conn, APPOINTMENT_REMINDER, row["id"])
        return
    entries = plan(list(calendar["reminders"] or []), row["start"], now or utcnow())
    await conn.execute(WRITE_PLAN, row["id"], entries)
    due_at = next_pending(entries)
    if due_at is None:
        await cancel_due(conn, APPOINTMENT_REMINDER, row["id"])
    else:
        await schedule_due(conn, scope.sub_account_id, APPOINTMENT_REMINDER, row["id"], due_at)


def _values(contact: asyncpg.Record, appointment: asyncpg.Record, now: datetime) -> dict[str, str]:
    """The placeholders of a call's context that a reminder has (contact, sub-account, now,
    today in the calendar's timezone), plus appointment.start_local and calendar.name."""
    row = {
        **dict(contact),
        "variables": {},
        "timezone": appointment["timezone"],
        "direction": "",
        "from_number": "",
        "to_number": "",
    }
    values = context_values(row, now)
    for key in ("call.direction", "call.from_number", "call.to_number"):
        values.pop(key, None)
    local = appointment["start"].astimezone(ZoneInfo(appointment["timezone"]))
    values["appointment.start_local"] = local.strftime("%Y-%m-%d %H:%M")
    values["calendar.name"] = appointment["calendar_name"]
    return values


async def _send(
    scope: TenantScope,
    conn: asyncpg.Connection,
    organisation_id: uuid.UUID,
    appointment: asyncpg.Record,
    entry: dict[str, Any],
    now: datetime,
) -> None:
    """Send one entry (its outcome written on `entry`), unless its message exists already."""
    message_id = uuid.UUID(entry["message_id"])
    recorded = await conn.fetchval(SELECT_MESSAGE, message_id)
    if recorded == "queued":
        # Charged and recorded by a run that died before the provider's answer: sent again.
        recorded = await send_queued(scope, organisation_id, message_id)
    if recorded is not None:
        failed = recorded == "failed"
        entry.update(
            status="failed" if failed else "sent", reason="provider_error" if failed else None
        )
        return
    contact = await conn.fetchrow(SELECT_CONTACT_VALUES, appointment["contact_id"])
    values = _values(contact, appointment, now)
    limit = MAX_SMS if entry["channel"] == "sms" else None
    content = render(entry["template"], values, limit)
    subject = render(entry["subject"], values) if entry.get("subject") else None
    try:
        await send_to_contact(
            scope,
            organisation_id,
            appointment["contact_id"],
            Outgoing(entry["channel"], content, subject),
            message_id=message_id,
        )
    except APIError as exc:
        refused = exc.status < 500
        entry.update(status="skipped" if refused else "failed", reason=exc.code)
        return
    entry.update(status="sent", reason=None)


async def send_due_reminders(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    """Due-work handler: send the appointment's pending reminders whose time has come; the
    time of the next one, or None when none is left."""
    scope = work.scope(ctx["db"])
    organisation_id = await scope.pool.fetchval(SELECT_ORGANISATION, scope.sub_account_id)
    async with scope.transaction() as conn:
        appointment = await conn.fetchrow(SELECT_FOR_RUN, work.ref_id)
        if appointment is None or appointment["status"] != "booked":
            return None
        entries = list(appointment["reminders"] or [])
        now = utcnow()
        due = sorted(
            (
                e
                for e in entries
                if e["status"] == "pending" and datetime.fromisoformat(e["at"]) <= now
            ),
            key=lambda e: (e["at"], e["index"]),
        )
        for entry in due:
            await _send(scope, conn, organisation_id, appointment, entry, now)
            entry["sent_at" if entry["status"] == "sent" else "settled_at"] = iso(now)
            await conn.execute(WRITE_PLAN, appointment["id"], entries)
        return next_pending(entries)
