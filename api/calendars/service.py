"""Calendar rules: create, read, change and delete calendars, and their free slots.

What a job, the booking tools and the appointments feature call:

- `free_slots(conn, calendar_id, from_day, to_day, now, limit)`: (calendar row, the first
  `limit` (MAX_SLOTS) free slots for the local dates [from_day, to_day] (at most 31), whether
  there were more), in the caller's tenant transaction;
- `next_free_slots(scope, calendar_id, from_day, now, limit)`: the first `limit` free slots from
  a day on (default: today in the calendar's timezone), across later days;
- `lock_calendar(conn, calendar_id)`: the calendar row, locked until the transaction ends:
  bookings and reschedules of one calendar run one at a time behind it, so the buffer rule holds
  between them, and a delete cannot slip between a booking's check and its insert;
- `slot_at(conn, calendar, start, now, exclude=None)`: the free slot starting exactly at `start`.

The arithmetic is api/calendars/slots.py; this module reads what it needs in one query each
(the calendar, then its booked appointments over the span the candidate slots cover, a chunk of
candidates at a time), and never computes more slots than the answer holds (CONTRACT 18a).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg

from api.calendars import slots
from api.calendars.schemas import (
    EDITABLE,
    MAX_RANGE_DAYS,
    CreateCalendarRequest,
    UpdateCalendarRequest,
)
from tenancy.clock import iso, utcnow
from tenancy.db import fetch_newest_page, fetch_one_or_404
from tenancy.errors import APIError
from tenancy.scope import TenantScope

COLUMNS = """id, name, timezone, slot_minutes, buffer_minutes, min_notice_minutes,
max_days_ahead, availability, reminders, created_at, updated_at"""

INSERT_CALENDAR = f"""
INSERT INTO calendars (name, timezone, slot_minutes, buffer_minutes, min_notice_minutes,
                       max_days_ahead, availability, reminders)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING {COLUMNS}
"""

SELECT_CALENDAR = f"SELECT {COLUMNS} FROM calendars WHERE id = $1"

SELECT_CALENDAR_FOR_UPDATE = SELECT_CALENDAR + " FOR UPDATE"

UPDATE_CALENDAR = f"""
UPDATE calendars
SET name = $2, timezone = $3, slot_minutes = $4, buffer_minutes = $5, min_notice_minutes = $6,
    max_days_ahead = $7, availability = $8, reminders = $9, updated_at = now()
WHERE id = $1
RETURNING {COLUMNS}
"""

# Booked appointments still to come (or under way) keep their calendar.
IN_USE = """
SELECT EXISTS (SELECT 1 FROM appointments
               WHERE calendar_id = $1 AND status = 'booked' AND "end" > now())
"""

# A check_availability or book_appointment tool names its calendar in its config (CONTRACT
# 18a); a tool's create or change locks that calendar FOR KEY SHARE (api/tools/service.py), so
# either the deletion sees the tool or the tool waits for the deletion and finds no calendar.
TOOLS_USING = """
SELECT name FROM tools WHERE config ->> 'calendar_id' = $1::uuid::text
ORDER BY created_at, id LIMIT 1
"""

# The deletion takes its appointments with it: their rows are locked before the calendar's, the
# order every change of an appointment takes (api/appointments/service.py).
LOCK_APPOINTMENTS = "SELECT id FROM appointments WHERE calendar_id = $1 ORDER BY id FOR UPDATE"

DELETE_CALENDAR = "DELETE FROM calendars WHERE id = $1"

# The partial gist index of the exclusion constraint answers this (calendar, booked, overlap).
SELECT_BOOKED = """
SELECT start, "end" FROM appointments
WHERE calendar_id = $1 AND status = 'booked' AND tstzrange(start, "end") && tstzrange($2, $3)
  AND id IS DISTINCT FROM $4::uuid
"""


def calendar_out(row: asyncpg.Record) -> dict[str, Any]:
    return dict(row)


def stored_reminders(reminders: list[Any]) -> list[dict[str, Any]]:
    return [reminder.model_dump() for reminder in reminders]


def stored_availability(windows: list[Any]) -> list[dict[str, Any]]:
    return [window.model_dump() for window in windows]


def rules_of(calendar: asyncpg.Record | dict[str, Any]) -> slots.Rules:
    return slots.Rules(
        zone=ZoneInfo(calendar["timezone"]),
        slot_minutes=calendar["slot_minutes"],
        buffer_minutes=calendar["buffer_minutes"],
        min_notice_minutes=calendar["min_notice_minutes"],
        max_days_ahead=calendar["max_days_ahead"],
        windows=slots.windows_of(calendar["availability"]),
    )


def slot_out(slot: slots.Slot, zone: ZoneInfo) -> dict[str, Any]:
    """A free slot as the API shows it: UTC start and end, and the start in local time with
    the calendar's offset (ISO 8601, to the second)."""
    return {
        "start": iso(slot.start),
        "end": iso(slot.end),
        "start_local": slot.start_local(zone).isoformat(timespec="seconds"),
    }


def invalid(field: str, message: str) -> APIError:
    return APIError(
        400,
        "validation_error",
        f"{field} {message}",
        details=[{"field": field, "message": message, "type": "value_error"}],
    )


def check_range(from_day: date, to_day: date) -> None:
    """The days of a free-slot request: `to` not before `from`, at most 31 days in all."""
    if to_day < from_day:
        raise invalid("to", "must not be before from")
    if (to_day - from_day).days >= MAX_RANGE_DAYS:
        raise invalid("to", f"must be at most {MAX_RANGE_DAYS} days from from (inclusive)")


# --- calendars --------------------------------------------------------------------------------


async def create_calendar(scope: TenantScope, data: CreateCalendarRequest) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await conn.fetchrow(
            INSERT_CALENDAR,
            data.name,
            data.timezone,
            data.slot_minutes,
            data.buffer_minutes,
            data.min_notice_minutes,
            data.max_days_ahead,
            stored_availability(data.availability),
            stored_reminders(data.reminders),
        )
    return calendar_out(row)


async def get_calendar(scope: TenantScope, calendar_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_CALENDAR, calendar_id, what="calendar")
    return calendar_out(row)


async def list_calendars(
    scope: TenantScope, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of calendars, newest first."""
    async with scope.transaction() as conn:
        return await fetch_newest_page(conn, "calendars", COLUMNS, [], limit, offset)


def _changes(data: UpdateCalendarRequest) -> dict[str, Any]:
    """The fields the body sent, as stored; null for any of them is 400 (none may be null)."""
    sent = data.model_fields_set & set(EDITABLE)
    nulls = [field for field in EDITABLE if field in sent and getattr(data, field) is None]
    if nulls:
        raise APIError(
            400,
            "validation_error",
            "invalid request",
            details=[
                {"field": field, "message": "must not be null", "type": "null"} for field in nulls
            ],
        )
    if not sent:
        raise APIError(400, "nothing_to_update", "send at least one of " + ", ".join(EDITABLE))
    changes = {field: getattr(data, field) for field in sent}
    if "availability" in changes:
        changes["availability"] = stored_availability(changes["availability"])
    if "reminders" in changes:
        changes["reminders"] = stored_reminders(changes["reminders"])
    return changes


async def update_calendar(
    scope: TenantScope, calendar_id: uuid.UUID, data: UpdateCalendarRequest
) -> dict[str, Any]:
    """Change the fields sent. Appointments already booked keep their times."""
    changes = _changes(data)
    async with scope.transaction() as conn:
        current = await fetch_one_or_404(
            conn, SELECT_CALENDAR_FOR_UPDATE, calendar_id, what="calendar"
        )
        values = {field: changes.get(field, current[field]) for field in EDITABLE}
        row = await conn.fetchrow(
            UPDATE_CALENDAR, calendar_id, *(values[field] for field in EDITABLE)
        )
    return calendar_out(row)


async def delete_calendar(scope: TenantScope, calendar_id: uuid.UUID) -> None:
    """Delete a calendar with its past and cancelled appointments; 409 calendar_in_use while a
    booked one is still to come or a tool names it."""
    async with scope.transaction() as conn:
        await conn.execute(LOCK_APPOINTMENTS, calendar_id)
        await lock_calendar(conn, calendar_id)
        if await conn.fetchval(IN_USE, calendar_id):
            raise APIError(
                409,
                "calendar_in_use",
                "the calendar has booked appointments still to come; cancel them first",
            )
        tool = await conn.fetchval(TOOLS_USING, calendar_id)
        if tool is not None:
            raise APIError(
                409,
                "calendar_in_use",
                f"the tool {tool!r} uses this calendar; change its config or delete it first",
            )
        await conn.execute(DELETE_CALENDAR, calendar_id)


# --- free slots -------------------------------------------------------------------------------


async def lock_calendar(conn: asyncpg.Connection, calendar_id: uuid.UUID) -> asyncpg.Record:
    """The calendar row, locked until the caller's transaction ends (404 when there is none)."""
    return await fetch_one_or_404(conn, SELECT_CALENDAR_FOR_UPDATE, calendar_id, what="calendar")


async def booked_between(
    conn: asyncpg.Connection,
    calendar_id: uuid.UUID,
    span: tuple[datetime, datetime] | None,
    exclude: uuid.UUID | None = None,
) -> list[tuple[datetime, datetime]]:
    """(start, end) of the calendar's booked appointments that overlap `span`, but `exclude`."""
    if span is None:
        return []
    rows = await conn.fetch(SELECT_BOOKED, calendar_id, span[0], span[1], exclude)
    return [(row["start"], row["end"]) for row in rows]


async def free_in(
    conn: asyncpg.Connection,
    calendar: asyncpg.Record | dict[str, Any],
    from_day: date,
    to_day: date,
    now: datetime,
    exclude: uuid.UUID | None = None,
    limit: int | None = None,
) -> list[slots.Slot]:
    """The free slots of `calendar` (a row) starting on the local dates [from_day, to_day]: the
    first `limit` (all when None). The grid is laid out lazily, a chunk at a time, each chunk
    checked against the booked appointments over its span (one query), until `limit` are
    found: a range that holds far more costs only what the answer needs."""
    rules = rules_of(calendar)
    found: list[slots.Slot] = []
    size = slots.MAX_SLOTS + 1 if limit is None else limit
    for chunk in slots.chunks(slots.grid(rules, from_day, to_day, now), max(size, 1)):
        taken = await booked_between(
            conn, calendar["id"], slots.span_of(chunk, rules.buffer_minutes), exclude
        )
        found += slots.sweep(chunk, slots.blocked(taken, rules.buffer_minutes))
        if limit is not None and len(found) >= limit:
            return found[:limit]
    return found


async def free_slots(
    conn: asyncpg.Connection,
    calendar_id: uuid.UUID,
    from_day: date,
    to_day: date,
    now: datetime | None = None,
    limit: int = slots.MAX_SLOTS,
) -> tuple[asyncpg.Record, list[slots.Slot], bool]:
    """(the calendar row, its first `limit` free slots on the local dates [from_day, to_day],
    whether the range held more); 404 when the calendar is not the tenant's, 400 for a range
    `check_range` refuses. Computes at most `limit` + 1 slots (the one past tells truncated)."""
    check_range(from_day, to_day)
    calendar = await fetch_one_or_404(conn, SELECT_CALENDAR, calendar_id, what="calendar")
    found = await free_in(conn, calendar, from_day, to_day, now or utcnow(), limit=limit + 1)
    return calendar, found[:limit], len(found) > limit


async def list_free_slots(
    scope: TenantScope,
    calendar_id: uuid.UUID,
    from_day: date,
    to_day: date,
    now: datetime | None = None,
) -> dict[str, Any]:
    """GET /calendars/{id}/free-slots: the body's fields beside `status` (at most MAX_SLOTS
    slots, earliest first, and `truncated` when the range held more)."""
    async with scope.transaction() as conn:
        calendar, found, truncated = await free_slots(conn, calendar_id, from_day, to_day, now)
    zone = ZoneInfo(calendar["timezone"])
    return {
        "calendar_id": calendar["id"],
        "timezone": calendar["timezone"],
        "slots": [slot_out(slot, zone) for slot in found],
        "truncated": truncated,
    }


async def next_free_slots(
    scope: TenantScope,
    calendar_id: uuid.UUID,
    from_day: date | None = None,
    now: datetime | None = None,
    limit: int = 10,
) -> tuple[dict[str, Any], list[slots.Slot]]:
    """(the calendar, the first `limit` free slots starting on `from_day` or later, default
    today in the calendar's timezone), walking 31 days at a time up to max_days_ahead."""
    now = now or utcnow()
    found: list[slots.Slot] = []
    async with scope.transaction() as conn:
        calendar = await fetch_one_or_404(conn, SELECT_CALENDAR, calendar_id, what="calendar")
        rules = rules_of(calendar)
        today = now.astimezone(rules.zone).date()
        day = max(from_day or today, today - timedelta(days=1))
        last = slots.horizon(rules, now)[1].astimezone(rules.zone).date() + timedelta(days=1)
        while len(found) < limit and day <= last:
            to_day = day + timedelta(days=MAX_RANGE_DAYS - 1)
            found += await free_in(conn, calendar, day, to_day, now, limit=limit - len(found))
            day = to_day + timedelta(days=1)
    return calendar_out(calendar), found[:limit]


async def slot_at(
    conn: asyncpg.Connection,
    calendar: asyncpg.Record,
    start: datetime,
    now: datetime,
    exclude: uuid.UUID | None = None,
) -> slots.Slot | None:
    """The free slot of `calendar` that starts exactly at `start` (the appointment `exclude`
    counting as free), or None. A slot starts on its own local date, so one day is computed."""
    rules = rules_of(calendar)
    earliest, latest = slots.horizon(rules, now)
    if not earliest <= start <= latest:
        return None
    day = start.astimezone(rules.zone).date()
    return slots.is_slot_start(await free_in(conn, calendar, day, day, now, exclude), start)
