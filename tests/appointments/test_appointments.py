"""Appointments (CONTRACT 10): book a free slot, list, read, reschedule and cancel; the events
they fire; and the service functions a job or the voice runtime calls."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.appointments import service
from tenancy.clock import utcnow
from tests.factories import (
    APPOINTMENTS,
    CALENDARS,
    CONTACTS,
    book,
    create_calendar,
    create_contact,
    free_slots,
    insert_contact,
    make_agent,
    subscribe,
)
from tests.helpers import expect_error, scope_of, stored_events, tenant_sql

WEEK = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def in_days(days: int) -> str:
    return (utcnow() + timedelta(days=days)).date().isoformat()


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def setup(
    client: Any, tenant: Any, **calendar: Any
) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """A calendar (09:00-12:00 UTC every day, 30-minute slots unless given), a contact, and the
    free slots of a day three days ahead."""
    calendar.setdefault(
        "availability", [{"day": day, "start": "09:00", "end": "12:00"} for day in WEEK]
    )
    created = await create_calendar(client, tenant, **calendar)
    contact_id = await create_contact(client, tenant)
    return created, contact_id, await free_slots(client, tenant, created["id"], in_days(3))


async def post(client: Any, tenant: Any, **body: Any) -> Any:
    return await client.post(APPOINTMENTS, json=body, headers=tenant.headers)


async def patch(client: Any, tenant: Any, appointment_id: str, **body: Any) -> Any:
    return await client.patch(f"{APPOINTMENTS}/{appointment_id}", json=body, headers=tenant.headers)


# --- booking ----------------------------------------------------------------------------------


async def test_booking_a_free_slot_is_201_and_stored(client, tenant, pool):
    calendar, contact_id, slots = await setup(client, tenant, slot_minutes=45)

    response = await post(
        client,
        tenant,
        calendar_id=calendar["id"],
        contact_id=contact_id,
        start=slots[1]["start"],
        title="Intro call",
        notes="Bring the plan",
    )

    assert response.status_code == 201
    answer = await response.get_json()
    appointment = answer["appointment"]
    assert answer["status"] == "success"
    assert {
        key: appointment[key]
        for key in (
            "calendar_id",
            "contact_id",
            "start",
            "end",
            "status",
            "title",
            "notes",
            "source",
            "call_id",
        )
    } == {
        "calendar_id": calendar["id"],
        "contact_id": contact_id,
        "start": slots[1]["start"],
        "end": slots[1]["end"],
        "status": "booked",
        "title": "Intro call",
        "notes": "Bring the plan",
        "source": "api",
        "call_id": None,
    }
    assert at(appointment["end"]) - at(appointment["start"]) == timedelta(minutes=45)
    [row] = await tenant_sql(
        pool,
        tenant,
        'SELECT start, "end", status FROM appointments WHERE id = $1',
        uuid.UUID(appointment["id"]),
    )
    assert (row["start"], row["end"], row["status"]) == (
        at(slots[1]["start"]),
        at(slots[1]["end"]),
        "booked",
    )


async def test_start_may_be_given_in_local_time_with_its_offset(client, tenant):
    calendar, contact_id, _ = await setup(client, tenant, timezone="America/New_York")
    slots = await free_slots(client, tenant, calendar["id"], in_days(3))

    appointment = await book(client, tenant, calendar["id"], contact_id, slots[0]["start_local"])

    assert appointment["start"] == slots[0]["start"]


async def test_booking_fires_appointment_booked_with_the_answer(client, tenant, pool):
    await subscribe(
        client, tenant, "https://hooks.example.com/appointments", ["appointment.booked"]
    )
    calendar, contact_id, slots = await setup(client, tenant)

    appointment = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    [event] = [e for e in await stored_events(pool, tenant) if e["type"].startswith("appoint")]
    assert event["type"] == "appointment.booked"
    assert event["data"] == {"sub_account_id": str(tenant.id), "appointment": appointment}


@pytest.mark.parametrize(
    "shift",
    [
        timedelta(minutes=15),
        timedelta(minutes=-30),
        timedelta(seconds=1),
        timedelta(hours=5),
    ],
)
async def test_a_start_off_the_free_slots_is_409_slot_unavailable(client, tenant, pool, shift):
    calendar, contact_id, slots = await setup(client, tenant)
    start = (at(slots[0]["start"]) + shift).isoformat()

    response = await post(
        client, tenant, calendar_id=calendar["id"], contact_id=contact_id, start=start
    )

    await expect_error(response, 409, "slot_unavailable")
    assert (await tenant_sql(pool, tenant, "SELECT count(*) FROM appointments"))[0][0] == 0


@pytest.mark.parametrize("days", [-2, 0, 70, 400])
async def test_a_start_in_the_past_or_beyond_max_days_is_409(client, tenant, days):
    calendar, contact_id, _ = await setup(client, tenant, min_notice_minutes=24 * 60)
    start = datetime.combine(
        (utcnow() + timedelta(days=days)).date(), datetime.min.time(), UTC
    ) + timedelta(hours=9)

    response = await post(
        client, tenant, calendar_id=calendar["id"], contact_id=contact_id, start=start.isoformat()
    )

    await expect_error(response, 409, "slot_unavailable")


async def test_a_taken_slot_is_409_and_so_is_one_inside_the_buffer(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant, buffer_minutes=0)
    await book(client, tenant, calendar["id"], contact_id, slots[2]["start"])

    again = await post(
        client, tenant, calendar_id=calendar["id"], contact_id=contact_id, start=slots[2]["start"]
    )

    await expect_error(again, 409, "slot_unavailable")
    await client.patch(
        f"{CALENDARS}/{calendar['id']}",
        json={"slot_minutes": 15, "buffer_minutes": 15},
        headers=tenant.headers,
    )
    # 10:00-10:30 is booked; the 15 + 15 grid offers 10:30, which starts within the buffer,
    # and 09:30-09:45, which ends exactly the buffer before.
    after = (at(slots[2]["start"]) + timedelta(minutes=30)).isoformat()
    await expect_error(
        await post(client, tenant, calendar_id=calendar["id"], contact_id=contact_id, start=after),
        409,
        "slot_unavailable",
    )
    before = (at(slots[2]["start"]) - timedelta(minutes=30)).isoformat()
    assert (
        await post(client, tenant, calendar_id=calendar["id"], contact_id=contact_id, start=before)
    ).status_code == 201


@pytest.mark.parametrize(
    ("start", "field"),
    [
        ("tomorrow at nine", "start"),
        ("2026-12-01T09:00:00", "start"),
        ("", "start"),
        ("2026-13-01T09:00:00Z", "start"),
        ("9999-12-31T23:00:00-23:59", "start"),
    ],
)
async def test_a_malformed_start_is_400_naming_it(client, tenant, start, field):
    calendar, contact_id, _ = await setup(client, tenant)

    answer = await expect_error(
        await post(client, tenant, calendar_id=calendar["id"], contact_id=contact_id, start=start),
        400,
        "validation_error",
    )
    assert answer["error"]["details"][0]["field"] == field


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"title": "x" * 201}, "title"),
        ({"notes": "x" * 5001}, "notes"),
        ({"title": 5}, "title"),
    ],
)
async def test_title_and_notes_have_bounds(client, tenant, fields, field):
    calendar, contact_id, slots = await setup(client, tenant)

    answer = await expect_error(
        await post(
            client,
            tenant,
            calendar_id=calendar["id"],
            contact_id=contact_id,
            start=slots[0]["start"],
            **fields,
        ),
        400,
        "validation_error",
    )
    assert answer["error"]["details"][0]["field"] == field


@pytest.mark.parametrize("missing", ["calendar_id", "contact_id", "start"])
async def test_required_fields_are_400(client, tenant, missing):
    calendar, contact_id, slots = await setup(client, tenant)
    body = {"calendar_id": calendar["id"], "contact_id": contact_id, "start": slots[0]["start"]}
    del body[missing]

    answer = await expect_error(await post(client, tenant, **body), 400, "validation_error")
    assert answer["error"]["details"][0]["field"] == missing


async def test_unknown_calendar_or_contact_is_404_and_a_bad_id_400(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant)
    start = slots[0]["start"]

    for body in (
        {"calendar_id": str(uuid.uuid4()), "contact_id": contact_id},
        {"calendar_id": calendar["id"], "contact_id": str(uuid.uuid4())},
    ):
        await expect_error(await post(client, tenant, start=start, **body), 404, "not_found")
    await expect_error(
        await post(client, tenant, calendar_id="x", contact_id=contact_id, start=start),
        400,
        "invalid_uuid",
    )


async def test_a_contact_with_appointments_cannot_be_deleted(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant)
    booked = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])
    await patch(client, tenant, booked["id"], status="cancelled")

    response = await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)

    await expect_error(response, 409, "contact_referenced")
    assert (await client.get(f"{CONTACTS}/{contact_id}", headers=tenant.headers)).status_code == 200


# --- reading and listing ----------------------------------------------------------------------


async def test_get_answers_the_appointment_as_booked(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant)
    booked = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    response = await client.get(f"{APPOINTMENTS}/{booked['id']}", headers=tenant.headers)

    assert await response.get_json() == {"status": "success", "appointment": booked}
    await expect_error(
        await client.get(f"{APPOINTMENTS}/{uuid.uuid4()}", headers=tenant.headers), 404, "not_found"
    )
    await expect_error(
        await client.get(f"{APPOINTMENTS}/1", headers=tenant.headers), 400, "invalid_uuid"
    )


async def test_list_is_ascending_by_start_and_filters(client, tenant):
    calendar, ada, slots = await setup(client, tenant)
    other = await create_calendar(client, tenant)
    bob = await create_contact(client, tenant)
    late = await book(client, tenant, calendar["id"], ada, slots[4]["start"])
    early = await book(client, tenant, calendar["id"], bob, slots[0]["start"])
    middle = await book(client, tenant, calendar["id"], ada, slots[2]["start"])
    elsewhere = await book(
        client,
        tenant,
        other["id"],
        ada,
        (await free_slots(client, tenant, other["id"], in_days(4)))[0]["start"],
    )
    await patch(client, tenant, middle["id"], status="cancelled")

    async def ids(**query: str) -> list[str]:
        response = await client.get(APPOINTMENTS, query_string=query, headers=tenant.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)
        return [item["id"] for item in (await response.get_json())["appointments"]]

    assert await ids() == [early["id"], middle["id"], late["id"], elsewhere["id"]]
    assert await ids(calendar_id=calendar["id"]) == [early["id"], middle["id"], late["id"]]
    assert await ids(contact_id=ada) == [middle["id"], late["id"], elsewhere["id"]]
    assert await ids(status="booked") == [early["id"], late["id"], elsewhere["id"]]
    assert await ids(status="cancelled") == [middle["id"]]
    assert await ids(**{"from": slots[2]["start"], "to": slots[4]["start"]}) == [middle["id"]]
    assert await ids(**{"from": slots[2]["start"].replace(".000Z", "+00:00")}) == [
        middle["id"],
        late["id"],
        elsewhere["id"],
    ]
    assert await ids(to=slots[1]["start"][:19]) == [early["id"]]  # no offset: UTC


async def test_list_has_the_general_envelope(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant)
    for slot in slots[:3]:
        await book(client, tenant, calendar["id"], contact_id, slot["start"])

    response = await client.get(f"{APPOINTMENTS}?limit=2&offset=1", headers=tenant.headers)

    answer = await response.get_json()
    assert [item["start"] for item in answer["appointments"]] == [
        slots[1]["start"],
        slots[2]["start"],
    ]
    assert (answer["total"], answer["limit"], answer["offset"], answer["has_more"]) == (
        3,
        2,
        1,
        False,
    )


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("calendar_id=nope", "calendar_id"),
        ("contact_id=1", "contact_id"),
        ("status=done", "status"),
        ("from=yesterday", "from"),
        ("to=2026-13-01T00:00:00Z", "to"),
        ("from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", "to"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("offset=-1", "offset"),
    ],
)
async def test_bad_filters_are_400_naming_them(client, tenant, query, field):
    response = await client.get(f"{APPOINTMENTS}?{query}", headers=tenant.headers)

    answer = await expect_error(response, 400, "validation_error")
    assert answer["error"]["details"][0]["field"] == field


# --- reschedule and cancel --------------------------------------------------------------------


async def test_reschedule_moves_it_to_a_free_slot_and_fires_the_event(client, tenant, pool):
    calendar, contact_id, slots = await setup(client, tenant, slot_minutes=60)
    booked = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    response = await patch(client, tenant, booked["id"], start=slots[2]["start"])

    moved = (await response.get_json())["appointment"]
    assert response.status_code == 200
    assert (moved["start"], moved["end"], moved["status"]) == (
        slots[2]["start"],
        slots[2]["end"],
        "booked",
    )
    events = [e for e in await stored_events(pool, tenant) if e["type"].startswith("appoint")]
    assert [e["type"] for e in events] == ["appointment.booked", "appointment.rescheduled"]
    assert events[-1]["data"]["appointment"] == moved
    free = await free_slots(client, tenant, calendar["id"], in_days(3))
    assert slots[0] in free and slots[2] not in free


async def test_reschedule_may_overlap_its_own_time(client, tenant):
    # Two windows on one day give two grids half an hour apart: 10:30 overlaps 10:00-11:00.
    calendar, contact_id, _ = await setup(
        client,
        tenant,
        slot_minutes=60,
        availability=[
            {"day": d, "start": s, "end": "12:00"} for d in WEEK for s in ("09:00", "09:30")
        ],
    )
    slots = await free_slots(client, tenant, calendar["id"], in_days(3))
    ten = next(slot for slot in slots if slot["start"][11:16] == "10:00")
    half_past = next(slot for slot in slots if slot["start"][11:16] == "10:30")
    booked = await book(client, tenant, calendar["id"], contact_id, ten["start"])

    response = await patch(client, tenant, booked["id"], start=half_past["start"])

    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await response.get_json())["appointment"]["end"] == half_past["end"]


async def test_reschedule_to_its_own_start_changes_nothing_and_fires_nothing(client, tenant, pool):
    calendar, contact_id, slots = await setup(client, tenant)
    booked = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    response = await patch(client, tenant, booked["id"], start=slots[0]["start"], title="Same")

    assert response.status_code == 200
    assert (await response.get_json())["appointment"]["title"] == "Same"
    assert [
        e["type"] for e in await stored_events(pool, tenant) if e["type"].startswith("appoint")
    ] == ["appointment.booked"]


async def test_reschedule_to_a_taken_or_off_grid_start_is_409(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant)
    first = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])
    await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])

    for start in (slots[1]["start"], (at(slots[2]["start"]) + timedelta(minutes=5)).isoformat()):
        await expect_error(
            await patch(client, tenant, first["id"], start=start), 409, "slot_unavailable"
        )
    response = await client.get(f"{APPOINTMENTS}/{first['id']}", headers=tenant.headers)
    assert (await response.get_json())["appointment"] == first


async def test_cancel_is_final_and_fires_the_event(client, tenant, pool):
    calendar, contact_id, slots = await setup(client, tenant)
    booked = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    response = await patch(client, tenant, booked["id"], status="cancelled")

    cancelled = (await response.get_json())["appointment"]
    assert response.status_code == 200 and cancelled["status"] == "cancelled"
    event = [e for e in await stored_events(pool, tenant) if e["type"].startswith("appoint")][-1]
    assert (event["type"], event["data"]["appointment"]) == ("appointment.cancelled", cancelled)
    for body in ({"status": "cancelled"}, {"title": "again"}, {"start": slots[1]["start"]}):
        await expect_error(
            await patch(client, tenant, booked["id"], **body), 409, "appointment_cancelled"
        )
    response = await client.get(f"{APPOINTMENTS}/{booked['id']}", headers=tenant.headers)
    assert (await response.get_json())["appointment"] == cancelled


async def test_patch_title_and_notes_and_clear_them_with_null(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant)
    booked = await book(
        client, tenant, calendar["id"], contact_id, slots[0]["start"], title="Intro", notes="Notes"
    )

    response = await patch(client, tenant, booked["id"], title="Follow-up", notes=None)

    appointment = (await response.get_json())["appointment"]
    assert (appointment["title"], appointment["notes"], appointment["start"]) == (
        "Follow-up",
        None,
        booked["start"],
    )


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "nothing_to_update"),
        ({"colour": "red"}, "nothing_to_update"),
        ({"status": "booked"}, "validation_error"),
        ({"status": None}, "validation_error"),
        ({"start": None}, "validation_error"),
        ({"start": "soon"}, "validation_error"),
        ({"title": "x" * 201}, "validation_error"),
    ],
)
async def test_patch_refusals_are_400(client, tenant, body, code):
    calendar, contact_id, slots = await setup(client, tenant)
    booked = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    await expect_error(await patch(client, tenant, booked["id"], **body), 400, code)


async def test_patch_start_together_with_cancel_is_400(client, tenant):
    calendar, contact_id, slots = await setup(client, tenant)
    booked = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    response = await patch(
        client, tenant, booked["id"], start=slots[1]["start"], status="cancelled"
    )

    await expect_error(response, 400, "validation_error")


async def test_patch_unknown_is_404(client, tenant):
    await expect_error(await patch(client, tenant, str(uuid.uuid4()), title="x"), 404, "not_found")


async def test_subscriptions_take_the_appointment_events(client, tenant):
    subscription = await subscribe(
        client,
        tenant,
        "https://hooks.example.com/a",
        ["appointment.booked", "appointment.rescheduled", "appointment.cancelled"],
    )
    assert subscription["events"] == [
        "appointment.booked",
        "appointment.rescheduled",
        "appointment.cancelled",
    ]


# --- the service, as a job or the voice runtime calls it --------------------------------------


async def test_the_service_books_for_an_agent_with_its_call(client, tenant, pool):
    calendar, contact_id, slots = await setup(client, tenant)
    agent_id = await make_agent(client, tenant)
    other = await insert_contact(pool, tenant)
    [call] = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, "
        "provider, status) VALUES ($1, $2, '+14155550123', '+14155552671', "
        "'sandbox', 'in_progress') RETURNING id",
        other,
        uuid.UUID(agent_id),
    )

    appointment = await service.book(
        scope_of(pool, tenant),
        uuid.UUID(calendar["id"]),
        uuid.UUID(contact_id),
        at(slots[0]["start"]),
        source="agent",
        call_id=call["id"],
    )

    assert (appointment["source"], appointment["call_id"]) == ("agent", call["id"])
    response = await client.get(f"{APPOINTMENTS}/{appointment['id']}", headers=tenant.headers)
    shown = (await response.get_json())["appointment"]
    assert (shown["source"], shown["call_id"]) == ("agent", str(call["id"]))


async def test_the_service_refuses_an_unknown_call(client, tenant, pool):
    calendar, contact_id, slots = await setup(client, tenant)

    with pytest.raises(Exception) as refused:
        await service.book(
            scope_of(pool, tenant),
            uuid.UUID(calendar["id"]),
            uuid.UUID(contact_id),
            at(slots[0]["start"]),
            source="agent",
            call_id=uuid.uuid4(),
        )

    assert (refused.value.status, refused.value.code) == (404, "not_found")  # type: ignore
    assert (await tenant_sql(pool, tenant, "SELECT count(*) FROM appointments"))[0][0] == 0


async def test_the_service_reschedules_and_cancels(client, tenant, pool):
    calendar, contact_id, slots = await setup(client, tenant)
    scope = scope_of(pool, tenant)
    booked = await service.book(
        scope, uuid.UUID(calendar["id"]), uuid.UUID(contact_id), at(slots[0]["start"])
    )

    moved = await service.reschedule(scope, booked["id"], at(slots[3]["start"]))
    cancelled = await service.cancel(scope, booked["id"])

    assert moved["start"] == at(slots[3]["start"]) and cancelled["status"] == "cancelled"
