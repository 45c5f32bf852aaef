"""Appointment rules: book a free slot, list, read, reschedule and cancel.

Functions a job or the voice runtime calls as the routes do (no HTTP in here):

- `book(scope, calendar_id, contact_id, start, title=None, notes=None, source="api",
  call_id=None, now=None)`: the booked appointment, or APIError 404 (calendar, contact, call)
  or 409 `slot_unavailable`;
- `reschedule(scope, appointment_id, start, now=None)` and `cancel(scope, appointment_id)`;
- `get_appointment(scope, appointment_id)`; `parse_start(text)` reads a start as clients write it.

A booking or a reschedule locks its calendar row (bookings of one calendar run one at a time:
the buffer rule holds between them), then checks that `start` is a free slot's start, then
writes; the exclusion constraint on booked appointments is the last word on overlap (it answers
409 too).

Locks are taken in one order, an appointment's row before its calendar's, so no two changes
deadlock (CONTRACT 18a): every change of an existing appointment (reschedule, cancel, retitle)
locks the appointment row first, as a reminder run and a calendar's deletion do; a reschedule
then locks the calendar. A second write of one appointment row in a transaction (the reminder
plan, after the change) has its foreign key checked again, which takes a key-share lock on the
calendar row: had the reschedule locked the calendar first, a cancel holding the appointment
would wait there for it while it waited for the appointment. A booking locks only its calendar
(its appointment is new).

Every change that fires an event emits it as its transaction's last lock-taking step
(api/events.py). Work that must follow a booked, moved or cancelled appointment (reminders) is
written in the same transaction, in `_changed`, before the event.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from api import events
from api.appointments import tasks as reminders
from api.calendars import service as calendars
from tenancy.clock import utcnow
from tenancy.db import fetch_one_or_404, fetch_page, where_clause
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

COLUMNS = """id, calendar_id, contact_id, start, "end", status, title, notes, source, call_id,
created_at, updated_at"""

SELECT_CONTACT = "SELECT 1 FROM contacts WHERE id = $1"

INSERT_APPOINTMENT = f"""
INSERT INTO appointments (calendar_id, contact_id, start, "end", title, notes, source, call_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING {COLUMNS}
"""

SELECT_APPOINTMENT = f"SELECT {COLUMNS} FROM appointments WHERE id = $1"

SELECT_APPOINTMENT_FOR_UPDATE = SELECT_APPOINTMENT + " FOR UPDATE"

UPDATE_APPOINTMENT = f"""
UPDATE appointments
SET start = $2, "end" = $3, title = $4, notes = $5, status = $6, updated_at = now()
WHERE id = $1 AND status = 'booked'
RETURNING {COLUMNS}
"""

PAGE = """SELECT {columns}, count(*) OVER () AS total FROM appointments {where}
ORDER BY start, id LIMIT ${limit} OFFSET ${offset}"""
COUNT = "SELECT count(*) FROM appointments {where}"

CALL_REFERENCE = "fk_appointments_call_id_calls"


@dataclass(frozen=True)
class Changes:
    """What a PATCH asks: only the fields it sent (title and notes may be sent as null)."""

    start: datetime | None = None
    cancel: bool = False
    text: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Filters:
    calendar_id: uuid.UUID | None = None
    contact_id: uuid.UUID | None = None
    status: str | None = None
    start_from: datetime | None = None
    start_before: datetime | None = None


def parse_start(raw: str) -> datetime:
    """A start as clients (and the booking tool's model) write it: an ISO 8601 date-time with
    its offset, in UTC; otherwise 400 validation_error naming start."""
    try:
        value = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise calendars.invalid(
            "start", "must be an ISO 8601 date-time, such as 2026-12-01T09:00:00-05:00"
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise calendars.invalid("start", "must include its offset (for example Z or -05:00)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise calendars.invalid("start", "is out of range") from None


def appointment_out(row: asyncpg.Record) -> dict[str, Any]:
    return dict(row)


def slot_unavailable() -> APIError:
    return APIError(
        409,
        "slot_unavailable",
        "start is not the start of a free slot of the calendar (GET /calendars/{id}/free-slots)",
    )


def blank_to_none(text: str | None) -> str | None:
    return text if text is not None and text.strip() else None


async def _changed(
    conn: asyncpg.Connection,
    scope: TenantScope,
    event_type: str,
    row: asyncpg.Record,
    calendar: asyncpg.Record | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """What follows a booked, moved or cancelled appointment, in its transaction: its reminders
    planned for its start (or dropped; `calendar` is its calendar row when booked or moved),
    then the event (last: it holds the tenant's event stream until commit)."""
    await reminders.planned(conn, scope, row, calendar, now)
    appointment = appointment_out(row)
    await events.emit(
        conn, event_type, {"sub_account_id": str(scope.sub_account_id), "appointment": appointment}
    )
    return appointment


async def book(
    scope: TenantScope,
    calendar_id: uuid.UUID,
    contact_id: uuid.UUID,
    start: datetime,
    *,
    title: str | None = None,
    notes: str | None = None,
    source: str = "api",
    call_id: uuid.UUID | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Book the contact into the free slot of the calendar that starts at `start` (aware)."""
    now = now or utcnow()
    try:
        async with scope.transaction() as conn:
            calendar = await calendars.lock_calendar(conn, calendar_id)
            if await conn.fetchval(SELECT_CONTACT, contact_id) is None:
                raise not_found("contact")
            slot = await calendars.slot_at(conn, calendar, start, now)
            if slot is None:
                raise slot_unavailable()
            row = await conn.fetchrow(
                INSERT_APPOINTMENT,
                calendar_id,
                contact_id,
                slot.start,
                slot.end,
                blank_to_none(title),
                blank_to_none(notes),
                source,
                call_id,
            )
            return await _changed(conn, scope, "appointment.booked", row, calendar, now)
    except asyncpg.ExclusionViolationError:
        raise slot_unavailable() from None
    except asyncpg.ForeignKeyViolationError as exc:
        raise not_found("call" if exc.constraint_name == CALL_REFERENCE else "contact") from None


async def get_appointment(scope: TenantScope, appointment_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_APPOINTMENT, appointment_id, what="appointment")
    return appointment_out(row)


async def list_appointments(
    scope: TenantScope, filters: Filters, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of appointments matching every filter, ascending by start."""
    where, values = where_clause(
        [
            ("calendar_id = $?", filters.calendar_id),
            ("contact_id = $?", filters.contact_id),
            ("status = $?", filters.status),
            ("start >= $?", filters.start_from),
            ("start < $?", filters.start_before),
        ]
    )
    page = PAGE.format(columns=COLUMNS, where=where, limit=len(values) + 1, offset=len(values) + 2)
    async with scope.transaction() as conn:
        return await fetch_page(
            conn, page, COUNT.format(where=where), *values, limit, offset, count_args=tuple(values)
        )


def _refuse_if_cancelled(row: asyncpg.Record) -> None:
    if row["status"] == "cancelled":
        raise APIError(
            409,
            "appointment_cancelled",
            "the appointment is cancelled; a cancelled appointment is final",
        )


async def _moved(
    conn: asyncpg.Connection,
    current: asyncpg.Record,
    calendar: asyncpg.Record | None,
    start: datetime | None,
    now: datetime,
) -> tuple[datetime, datetime]:
    """(start, end) after the change: the current ones, or the free slot of `calendar` (locked)
    at `start`, the appointment's own time counting as free."""
    if start is None or calendar is None:
        return current["start"], current["end"]
    slot = await calendars.slot_at(conn, calendar, start, now, exclude=current["id"])
    if slot is None:
        raise slot_unavailable()
    return slot.start, slot.end


async def update_appointment(
    scope: TenantScope, appointment_id: uuid.UUID, changes: Changes, now: datetime | None = None
) -> dict[str, Any]:
    """Apply a PATCH: a new start (a free slot, the appointment's own time counting as free),
    title and notes, or the cancellation. Fires appointment.rescheduled when the start moved,
    appointment.cancelled when cancelled."""
    now = now or utcnow()
    try:
        async with scope.transaction() as conn:
            # The appointment first, then its calendar (the module's lock order): a cancel, a
            # reschedule and a reminder run of one appointment queue on its row first.
            current = await fetch_one_or_404(
                conn, SELECT_APPOINTMENT_FOR_UPDATE, appointment_id, what="appointment"
            )
            _refuse_if_cancelled(current)
            calendar = (
                None
                if changes.start is None
                else await calendars.lock_calendar(conn, current["calendar_id"])
            )
            start, end = await _moved(conn, current, calendar, changes.start, now)
            text = {key: current[key] for key in ("title", "notes")}
            text.update({key: blank_to_none(value) for key, value in changes.text.items()})
            status = "cancelled" if changes.cancel else current["status"]
            row = await conn.fetchrow(
                UPDATE_APPOINTMENT, appointment_id, start, end, text["title"], text["notes"], status
            )
            if changes.cancel:
                return await _changed(conn, scope, "appointment.cancelled", row)
            if start != current["start"]:
                return await _changed(conn, scope, "appointment.rescheduled", row, calendar, now)
            return appointment_out(row)
    except asyncpg.ExclusionViolationError:
        raise slot_unavailable() from None


async def reschedule(
    scope: TenantScope, appointment_id: uuid.UUID, start: datetime, now: datetime | None = None
) -> dict[str, Any]:
    """Move a booked appointment to the free slot starting at `start`."""
    return await update_appointment(scope, appointment_id, Changes(start=start), now)


async def cancel(scope: TenantScope, appointment_id: uuid.UUID) -> dict[str, Any]:
    """Cancel a booked appointment (final: 409 appointment_cancelled if it already is)."""
    return await update_appointment(scope, appointment_id, Changes(cancel=True))
