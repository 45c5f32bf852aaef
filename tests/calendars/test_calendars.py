"""Calendars (CONTRACT 10): create, list, read, PATCH and DELETE, with every bound of a field."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

from tenancy.clock import utcnow
from tests.factories import (
    ALL_DAY,
    APPOINTMENTS,
    CALENDARS,
    TOOLS,
    book,
    create_calendar,
    create_contact,
    free_slots,
)
from tests.helpers import expect_error, tenant_sql

WINDOW = {"day": "mon", "start": "09:00", "end": "17:00"}
REMINDER = {
    "minutes_before": 60,
    "channel": "sms",
    "template": "See you at {{ appointment.start_local }}",
}


def body(**fields: Any) -> dict[str, Any]:
    return {
        "name": "Consultations",
        "timezone": "Europe/London",
        "availability": [WINDOW],
        **fields,
    }


async def post(client: Any, tenant: Any, payload: Any) -> Any:
    return await client.post(CALENDARS, json=payload, headers=tenant.headers)


def in_days(days: int) -> str:
    return (utcnow() + timedelta(days=days)).date().isoformat()


# --- create -----------------------------------------------------------------------------------


async def test_create_is_201_with_the_defaults(client, tenant, pool):
    response = await post(client, tenant, body())

    assert response.status_code == 201
    answer = await response.get_json()
    calendar = answer["calendar"]
    assert answer["status"] == "success"
    assert {
        key: calendar[key]
        for key in (
            "name",
            "timezone",
            "slot_minutes",
            "buffer_minutes",
            "min_notice_minutes",
            "max_days_ahead",
            "availability",
            "reminders",
        )
    } == {
        "name": "Consultations",
        "timezone": "Europe/London",
        "slot_minutes": 30,
        "buffer_minutes": 0,
        "min_notice_minutes": 60,
        "max_days_ahead": 60,
        "availability": [WINDOW],
        "reminders": [],
    }
    assert calendar["created_at"].endswith("Z") and calendar["updated_at"].endswith("Z")
    [row] = await tenant_sql(
        pool,
        tenant,
        "SELECT name, timezone, availability FROM calendars WHERE id = $1",
        uuid.UUID(calendar["id"]),
    )
    assert (row["name"], row["timezone"], row["availability"]) == (
        "Consultations",
        "Europe/London",
        [WINDOW],
    )


async def test_create_keeps_every_field_sent(client, tenant):
    email = {
        "minutes_before": 1440,
        "channel": "email",
        "template": "Tomorrow: {{ calendar.name }}",
        "subject": "Your appointment",
    }
    response = await post(
        client,
        tenant,
        body(
            slot_minutes=45,
            buffer_minutes=15,
            min_notice_minutes=120,
            max_days_ahead=14,
            reminders=[REMINDER, email],
            availability=[WINDOW, {**WINDOW, "day": "sun"}],
        ),
    )

    calendar = (await response.get_json())["calendar"]
    assert response.status_code == 201
    assert (
        calendar["slot_minutes"],
        calendar["buffer_minutes"],
        calendar["min_notice_minutes"],
        calendar["max_days_ahead"],
    ) == (45, 15, 120, 14)
    assert calendar["reminders"] == [{**REMINDER, "subject": None}, email]
    assert [window["day"] for window in calendar["availability"]] == ["mon", "sun"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("slot_minutes", 5),
        ("slot_minutes", 480),
        ("buffer_minutes", 0),
        ("buffer_minutes", 240),
        ("min_notice_minutes", 0),
        ("min_notice_minutes", 43_200),
        ("max_days_ahead", 1),
        ("max_days_ahead", 365),
        ("slot_minutes", 30.0),
        ("availability", [{"day": "sun", "start": "00:00", "end": "24:00"}]),
        ("availability", [{"day": "sat", "start": "23:59", "end": "24:00"}]),
        ("availability", [WINDOW] * 50),
        ("reminders", [REMINDER] * 5),
        ("reminders", [{**REMINDER, "minutes_before": 1}, {**REMINDER, "minutes_before": 10_080}]),
        ("reminders", [{**REMINDER, "template": "x" * 1000}]),
        ("timezone", "UTC"),
        ("timezone", "Australia/Lord_Howe"),
        ("name", "x" * 200),
    ],
)
async def test_values_at_the_bounds_are_accepted(client, tenant, field, value):
    response = await post(client, tenant, body(**{field: value}))

    assert response.status_code == 201, await response.get_data(as_text=True)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("slot_minutes", 4, "slot_minutes"),
        ("slot_minutes", 481, "slot_minutes"),
        ("slot_minutes", 30.5, "slot_minutes"),
        ("slot_minutes", "30", "slot_minutes"),
        ("slot_minutes", True, "slot_minutes"),
        ("slot_minutes", None, "slot_minutes"),
        ("buffer_minutes", -1, "buffer_minutes"),
        ("buffer_minutes", 241, "buffer_minutes"),
        ("min_notice_minutes", -1, "min_notice_minutes"),
        ("min_notice_minutes", 43_201, "min_notice_minutes"),
        ("max_days_ahead", 0, "max_days_ahead"),
        ("max_days_ahead", 366, "max_days_ahead"),
        ("max_days_ahead", 10**20, "max_days_ahead"),
        ("timezone", "Mars/Olympus_Mons", "timezone"),
        ("timezone", "", "timezone"),
        ("timezone", "utc", "timezone"),
        ("timezone", "../etc/passwd", "timezone"),
        ("timezone", 5, "timezone"),
        ("name", "", "name"),
        ("name", "   ", "name"),
        ("name", "x" * 201, "name"),
        ("name", "Line\nbreak", "name"),
        ("availability", [], "availability"),
        ("availability", [WINDOW] * 51, "availability"),
        ("availability", [{**WINDOW, "day": "monday"}], "availability.0.day"),
        ("availability", [{**WINDOW, "start": "9:00"}], "availability.0.start"),
        ("availability", [{**WINDOW, "start": "24:00", "end": "24:00"}], "availability.0.start"),
        ("availability", [{**WINDOW, "end": "24:01"}], "availability.0.end"),
        ("availability", [{**WINDOW, "end": "25:00"}], "availability.0.end"),
        ("availability", [{**WINDOW, "start": "10:00", "end": "10:00"}], "availability.0.end"),
        ("availability", [{**WINDOW, "start": "10:00", "end": "09:59"}], "availability.0.end"),
        ("availability", [{"day": "mon", "start": "09:00"}], "availability.0.end"),
        ("reminders", [REMINDER] * 6, "reminders"),
        ("reminders", [{**REMINDER, "minutes_before": 0}], "reminders.0.minutes_before"),
        ("reminders", [{**REMINDER, "minutes_before": 10_081}], "reminders.0.minutes_before"),
        ("reminders", [{**REMINDER, "channel": "call"}], "reminders.0.channel"),
        ("reminders", [{**REMINDER, "template": ""}], "reminders.0.template"),
        ("reminders", [{**REMINDER, "template": " "}], "reminders.0.template"),
        ("reminders", [{**REMINDER, "template": "x" * 1001}], "reminders.0.template"),
        ("reminders", [{**REMINDER, "subject": "Hello"}], "reminders.0.subject"),
        (
            "reminders",
            [{**REMINDER, "channel": "email", "subject": "A\r\nBcc: x@example.com"}],
            "reminders.0.subject",
        ),
        ("reminders", None, "reminders"),
    ],
)
async def test_values_past_a_bound_are_400_naming_the_field(
    client, tenant, pool, field, value, named
):
    response = await post(client, tenant, body(**{field: value}))

    answer = await expect_error(response, 400, "validation_error")
    assert named in [detail["field"] for detail in answer["error"]["details"]], answer
    assert (await tenant_sql(pool, tenant, "SELECT count(*) FROM calendars"))[0][0] == 0


@pytest.mark.parametrize("missing", ["name", "timezone", "availability"])
async def test_required_fields_are_400_when_missing(client, tenant, missing):
    payload = body()
    del payload[missing]

    answer = await expect_error(await post(client, tenant, payload), 400, "validation_error")
    assert answer["error"]["details"][0]["field"] == missing


async def test_create_needs_a_sub_account_key(client, tenant):
    await expect_error(await client.post(CALENDARS, json=body()), 401, "missing_api_key")
    response = await client.post(CALENDARS, json=body(), headers=tenant.organisation.headers)
    await expect_error(response, 401, "invalid_api_key")


# --- read and list ----------------------------------------------------------------------------


async def test_get_answers_the_calendar_as_created(client, tenant):
    created = await create_calendar(client, tenant)

    response = await client.get(f"{CALENDARS}/{created['id']}", headers=tenant.headers)

    assert response.status_code == 200
    assert await response.get_json() == {"status": "success", "calendar": created}


async def test_get_unknown_is_404_and_non_uuid_is_400(client, tenant):
    await expect_error(
        await client.get(f"{CALENDARS}/{uuid.uuid4()}", headers=tenant.headers), 404, "not_found"
    )
    await expect_error(
        await client.get(f"{CALENDARS}/nope", headers=tenant.headers), 400, "invalid_uuid"
    )


async def test_list_is_newest_first_with_the_general_envelope(client, tenant):
    made = [(await create_calendar(client, tenant, name=f"c{n}"))["id"] for n in range(3)]

    first = await (await client.get(f"{CALENDARS}?limit=2", headers=tenant.headers)).get_json()
    rest = await (
        await client.get(f"{CALENDARS}?limit=2&offset=2", headers=tenant.headers)
    ).get_json()

    assert [c["id"] for c in first["calendars"]] == made[::-1][:2]
    assert (first["total"], first["limit"], first["offset"], first["has_more"]) == (3, 2, 0, True)
    assert [c["id"] for c in rest["calendars"]] == made[:1] and rest["has_more"] is False


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "offset=-1", "offset=x"])
async def test_list_bad_page_values_are_400(client, tenant, query):
    response = await client.get(f"{CALENDARS}?{query}", headers=tenant.headers)
    await expect_error(response, 400, "validation_error")


# --- PATCH ------------------------------------------------------------------------------------


async def test_patch_changes_only_the_fields_sent(client, tenant):
    created = await create_calendar(client, tenant, timezone="Europe/London")

    response = await client.patch(
        f"{CALENDARS}/{created['id']}",
        headers=tenant.headers,
        json={"slot_minutes": 60, "reminders": [REMINDER]},
    )

    calendar = (await response.get_json())["calendar"]
    assert response.status_code == 200
    assert calendar["slot_minutes"] == 60
    assert calendar["reminders"] == [{**REMINDER, "subject": None}]
    assert calendar["timezone"] == "Europe/London" and calendar["name"] == created["name"]
    assert calendar["availability"] == created["availability"]
    assert calendar["updated_at"] >= created["updated_at"]
    again = await client.get(f"{CALENDARS}/{created['id']}", headers=tenant.headers)
    assert (await again.get_json())["calendar"] == calendar


async def test_patch_can_empty_the_reminders(client, tenant):
    created = await create_calendar(client, tenant, reminders=[REMINDER])
    response = await client.patch(
        f"{CALENDARS}/{created['id']}", json={"reminders": []}, headers=tenant.headers
    )
    assert (await response.get_json())["calendar"]["reminders"] == []


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({}, "nothing_to_update"),
        ({"unknown": 1}, "nothing_to_update"),
        ({"slot_minutes": None}, "validation_error"),
        ({"availability": []}, "validation_error"),
        ({"timezone": "Nowhere/Land"}, "validation_error"),
        ({"name": None}, "validation_error"),
        ({"max_days_ahead": 366}, "validation_error"),
    ],
)
async def test_patch_refusals_are_400_and_change_nothing(client, tenant, payload, code):
    created = await create_calendar(client, tenant)

    response = await client.patch(
        f"{CALENDARS}/{created['id']}", json=payload, headers=tenant.headers
    )

    await expect_error(response, 400, code)
    again = await client.get(f"{CALENDARS}/{created['id']}", headers=tenant.headers)
    assert (await again.get_json())["calendar"] == created


async def test_patch_unknown_is_404(client, tenant):
    response = await client.patch(
        f"{CALENDARS}/{uuid.uuid4()}", json={"name": "x"}, headers=tenant.headers
    )
    await expect_error(response, 404, "not_found")


async def test_patch_keeps_booked_appointments_where_they_are(client, tenant):
    calendar = await create_calendar(client, tenant)
    contact_id = await create_contact(client, tenant)
    slot = (await free_slots(client, tenant, calendar["id"], in_days(3)))[0]
    booked = await book(client, tenant, calendar["id"], contact_id, slot["start"])

    await client.patch(
        f"{CALENDARS}/{calendar['id']}", json={"slot_minutes": 60}, headers=tenant.headers
    )

    response = await client.get(f"{APPOINTMENTS}/{booked['id']}", headers=tenant.headers)
    assert (await response.get_json())["appointment"] == booked


# --- DELETE -----------------------------------------------------------------------------------


async def test_delete_is_200_and_the_calendar_is_gone(client, tenant):
    created = await create_calendar(client, tenant)

    response = await client.delete(f"{CALENDARS}/{created['id']}", headers=tenant.headers)

    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "deleted": True,
        "calendar_id": created["id"],
    }
    await expect_error(
        await client.get(f"{CALENDARS}/{created['id']}", headers=tenant.headers), 404, "not_found"
    )
    await expect_error(
        await client.delete(f"{CALENDARS}/{created['id']}", headers=tenant.headers),
        404,
        "not_found",
    )


async def test_delete_with_an_appointment_to_come_is_409_calendar_in_use(client, tenant, pool):
    calendar = await create_calendar(client, tenant)
    contact_id = await create_contact(client, tenant)
    slot = (await free_slots(client, tenant, calendar["id"], in_days(2)))[0]
    booked = await book(client, tenant, calendar["id"], contact_id, slot["start"])

    response = await client.delete(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers)

    await expect_error(response, 409, "calendar_in_use")
    assert (
        await client.get(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers)
    ).status_code == 200
    cancel = await client.patch(
        f"{APPOINTMENTS}/{booked['id']}", json={"status": "cancelled"}, headers=tenant.headers
    )
    assert cancel.status_code == 200
    response = await client.delete(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers)
    assert response.status_code == 200
    # Its cancelled appointment went with it; the contact can go now.
    assert (await tenant_sql(pool, tenant, "SELECT count(*) FROM appointments"))[0][0] == 0
    assert (
        await client.delete(f"/webhooks/inbound/contacts/{contact_id}", headers=tenant.headers)
    ).status_code == 200


async def test_delete_with_only_past_appointments_takes_them_with_it(client, tenant, pool):
    calendar = await create_calendar(client, tenant)
    contact_id = await create_contact(client, tenant)
    slot = (await free_slots(client, tenant, calendar["id"], in_days(2)))[0]
    booked = await book(client, tenant, calendar["id"], contact_id, slot["start"])
    await tenant_sql(
        pool,
        tenant,
        "UPDATE appointments SET start = start - interval '30 days', "
        '"end" = "end" - interval \'30 days\' WHERE id = $1',
        uuid.UUID(booked["id"]),
    )

    response = await client.delete(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers)

    assert response.status_code == 200
    assert (await tenant_sql(pool, tenant, "SELECT count(*) FROM appointments"))[0][0] == 0


def calendar_tool(kind: str, calendar_id: str) -> dict[str, Any]:
    return {
        "name": f"{kind}_{uuid.uuid4().hex[:6]}",
        "type": kind,
        "description": "Calendar work.",
        "config": {"calendar_id": calendar_id},
    }


@pytest.mark.parametrize("kind", ["check_availability", "book_appointment"])
async def test_delete_of_a_calendar_a_tool_names_is_409_calendar_in_use(client, tenant, kind):
    calendar = await create_calendar(client, tenant)
    other = await create_calendar(client, tenant)
    created = await client.post(
        TOOLS, json=calendar_tool(kind, calendar["id"]), headers=tenant.headers
    )
    assert created.status_code == 201
    tool = (await created.get_json())["tool"]

    response = await client.delete(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers)

    answer = await expect_error(response, 409, "calendar_in_use")
    assert tool["name"] in answer["error"]["message"]
    assert (
        await client.get(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers)
    ).status_code == 200
    # Once the tool names another calendar, the first one can go.
    moved = await client.patch(
        f"{TOOLS}/{tool['id']}",
        json={"config": {"calendar_id": other["id"]}},
        headers=tenant.headers,
    )
    assert moved.status_code == 200
    assert (
        await client.delete(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers)
    ).status_code == 200
    await expect_error(
        await client.delete(f"{CALENDARS}/{other['id']}", headers=tenant.headers),
        409,
        "calendar_in_use",
    )
    assert (await client.delete(f"{TOOLS}/{tool['id']}", headers=tenant.headers)).status_code == 200
    assert (
        await client.delete(f"{CALENDARS}/{other['id']}", headers=tenant.headers)
    ).status_code == 200


async def test_a_tool_of_another_sub_account_never_holds_a_calendar(client, tenant, tenant_second):
    mine = await create_calendar(client, tenant)
    theirs = await create_calendar(client, tenant_second)
    created = await client.post(
        TOOLS, json=calendar_tool("check_availability", theirs["id"]), headers=tenant_second.headers
    )
    assert created.status_code == 201

    response = await client.delete(f"{CALENDARS}/{mine['id']}", headers=tenant.headers)

    assert response.status_code == 200


async def test_concurrent_tool_creates_and_calendar_delete_never_leave_a_dangling_tool(
    client, tenant, pool
):
    for _ in range(5):
        calendar = await create_calendar(client, tenant)
        create, delete = await asyncio.gather(
            client.post(
                TOOLS,
                json=calendar_tool("book_appointment", calendar["id"]),
                headers=tenant.headers,
            ),
            client.delete(f"{CALENDARS}/{calendar['id']}", headers=tenant.headers),
        )
        assert sorted((create.status_code, delete.status_code)) in ([200, 404], [201, 409])
        tools = await tenant_sql(
            pool,
            tenant,
            "SELECT 1 FROM tools WHERE config ->> 'calendar_id' = $1",
            calendar["id"],
        )
        calendars = await tenant_sql(
            pool, tenant, "SELECT 1 FROM calendars WHERE id = $1", uuid.UUID(calendar["id"])
        )
        assert len(tools) <= len(calendars)


async def test_calendar_covering_every_hour_is_allowed(client, tenant):
    calendar = await create_calendar(client, tenant, availability=ALL_DAY)
    assert len(calendar["availability"]) == 7
