"""Concurrent bookings of one slot (CONTRACT 10): the database keeps one calendar's booked
appointments from overlapping, so of 20 simultaneous bookings exactly one gets 201 and every
other 409 slot_unavailable, never a 500; and the exclusion constraint holds on its own too."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import asyncpg
import pytest

from tenancy import db
from tenancy.clock import utcnow
from tests.factories import APPOINTMENTS, book, create_calendar, create_contact, free_slots
from tests.helpers import error_code, tenant_sql

CONCURRENT = 20


async def test_twenty_concurrent_bookings_of_one_slot_give_one_201(client, tenant, pool):
    calendar = await create_calendar(client, tenant)
    contacts = [await create_contact(client, tenant) for _ in range(CONCURRENT)]
    day = (utcnow() + timedelta(days=3)).date().isoformat()
    slot = (await free_slots(client, tenant, calendar["id"], day))[0]

    responses = await asyncio.gather(
        *(
            client.post(
                APPOINTMENTS,
                headers=tenant.headers,
                json={
                    "calendar_id": calendar["id"],
                    "contact_id": contact_id,
                    "start": slot["start"],
                },
            )
            for contact_id in contacts
        )
    )

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [201] + [409] * (CONCURRENT - 1)
    for response in responses:
        if response.status_code == 409:
            assert await error_code(response) == "slot_unavailable"
    rows = await tenant_sql(pool, tenant, "SELECT start FROM appointments WHERE status = 'booked'")
    assert len(rows) == 1


async def test_concurrent_bookings_of_different_slots_all_succeed(client, tenant, pool):
    calendar = await create_calendar(client, tenant)
    contact_id = await create_contact(client, tenant)
    day = (utcnow() + timedelta(days=3)).date().isoformat()
    slots = (await free_slots(client, tenant, calendar["id"], day))[:10]

    responses = await asyncio.gather(
        *(
            client.post(
                APPOINTMENTS,
                headers=tenant.headers,
                json={
                    "calendar_id": calendar["id"],
                    "contact_id": contact_id,
                    "start": slot["start"],
                },
            )
            for slot in slots
        )
    )

    assert [response.status_code for response in responses] == [201] * len(slots)


async def test_the_database_refuses_overlapping_booked_appointments(client, tenant, pool):
    calendar = await create_calendar(client, tenant)
    contact_id = uuid.UUID(await create_contact(client, tenant))
    start = utcnow().replace(microsecond=0) + timedelta(days=2)
    insert = (
        'INSERT INTO appointments (calendar_id, contact_id, start, "end", status) '
        "VALUES ($1, $2, $3, $4, $5)"
    )
    calendar_id = uuid.UUID(calendar["id"])
    await tenant_sql(
        pool,
        tenant,
        insert,
        calendar_id,
        contact_id,
        start,
        start + timedelta(minutes=30),
        "booked",
    )

    with pytest.raises(asyncpg.ExclusionViolationError):
        await tenant_sql(
            pool,
            tenant,
            insert,
            calendar_id,
            contact_id,
            start + timedelta(minutes=29),
            start + timedelta(minutes=59),
            "booked",
        )
    # Touching ends, cancelled ones and other calendars do not overlap.
    await tenant_sql(
        pool,
        tenant,
        insert,
        calendar_id,
        contact_id,
        start + timedelta(minutes=30),
        start + timedelta(minutes=60),
        "booked",
    )
    await tenant_sql(
        pool,
        tenant,
        insert,
        calendar_id,
        contact_id,
        start,
        start + timedelta(minutes=30),
        "cancelled",
    )
    other = uuid.UUID((await create_calendar(client, tenant))["id"])
    await tenant_sql(
        pool, tenant, insert, other, contact_id, start, start + timedelta(minutes=30), "booked"
    )


RACES = 25


async def test_a_cancel_racing_a_reschedule_never_answers_500(client, tenant, pool, monkeypatch):
    """CONTRACT 18a: of a cancel and a reschedule of one appointment at once, one wins and the
    other answers 200 or 409; what is stored agrees with the answers. The calendar has a
    reminder, so both write the appointment's reminder plan too (the second write of its row).
    The locks are taken in one order: this holds without the retry of a deadlocked request
    (tenancy/db.py), which is switched off here."""
    monkeypatch.setattr(db, "RETRIED_ERRORS", db.STALE_STATEMENT_ERRORS)
    reminder = {"minutes_before": 60, "channel": "sms", "template": "See you soon"}
    calendar = await create_calendar(client, tenant, slot_minutes=15, reminders=[reminder])
    contact_id = await create_contact(client, tenant)
    day = (utcnow() + timedelta(days=3)).date().isoformat()
    slots = await free_slots(client, tenant, calendar["id"], day)
    assert len(slots) >= 2 * RACES

    for n in range(RACES):
        booked = await book(client, tenant, calendar["id"], contact_id, slots[2 * n]["start"])
        url = f"{APPOINTMENTS}/{booked['id']}"
        new_start = slots[2 * n + 1]["start"]
        cancel, move = await asyncio.gather(
            client.patch(url, json={"status": "cancelled"}, headers=tenant.headers),
            client.patch(url, json={"start": new_start}, headers=tenant.headers),
        )

        assert cancel.status_code in (200, 409), await cancel.get_data(as_text=True)
        assert move.status_code in (200, 409), await move.get_data(as_text=True)
        assert cancel.status_code == 200  # a booked appointment can always be cancelled
        (stored,) = await tenant_sql(
            pool,
            tenant,
            "SELECT status, start FROM appointments WHERE id = $1",
            uuid.UUID(booked["id"]),
        )
        assert stored["status"] == "cancelled"
        cancelled = (await cancel.get_json())["appointment"]
        if move.status_code == 200:
            # The reschedule went first: the cancel cancelled the moved appointment.
            assert (await move.get_json())["appointment"]["start"] == new_start
            assert cancelled["start"] == new_start
        else:
            # The cancel went first: the reschedule found it cancelled.
            assert await error_code(move) == "appointment_cancelled"
            assert cancelled["start"] == booked["start"]
        assert stored["start"] == datetime.fromisoformat(cancelled["start"])
