"""GET /calendars/{id}/free-slots (CONTRACT 10): the days asked for, the body's shape, and the
rules that take slots out (notice, days ahead, bookings and their buffer), as a client sees them;
the arithmetic itself is proven in test_free_slot_properties.py and test_daylight_saving.py."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from api.calendars import service, slots
from tenancy.clock import utcnow
from tests.factories import (
    APPOINTMENTS,
    CALENDARS,
    book,
    create_calendar,
    create_contact,
    free_slots,
)
from tests.helpers import expect_error, scope_of


def in_days(days: int) -> str:
    return (utcnow() + timedelta(days=days)).date().isoformat()


async def get(client: Any, tenant: Any, calendar_id: str, **query: str) -> Any:
    return await client.get(
        f"{CALENDARS}/{calendar_id}/free-slots", query_string=query, headers=tenant.headers
    )


async def test_free_slots_body_is_ascending_utc_with_local_starts(client, tenant):
    calendar = await create_calendar(
        client,
        tenant,
        timezone="America/New_York",
        slot_minutes=45,
        buffer_minutes=15,
        availability=[
            {"day": day, "start": "09:00", "end": "12:00"}
            for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
        ],
    )
    day = in_days(5)

    response = await get(client, tenant, calendar["id"], **{"from": day, "to": day})

    answer = await response.get_json()
    assert response.status_code == 200
    assert (answer["status"], answer["calendar_id"], answer["timezone"]) == (
        "success",
        calendar["id"],
        "America/New_York",
    )
    local = [slot["start_local"][:16] for slot in answer["slots"]]
    assert local == [f"{day}T09:00", f"{day}T10:00", f"{day}T11:00"]
    assert answer["truncated"] is False
    for slot in answer["slots"]:
        start = datetime.fromisoformat(slot["start"])
        assert slot["start"].endswith(".000Z") and slot["end"].endswith(".000Z")
        assert datetime.fromisoformat(slot["end"]) - start == timedelta(minutes=45)
        assert datetime.fromisoformat(slot["start_local"]) == start
        assert slot["start_local"][-6:] in ("-05:00", "-04:00")


async def test_a_range_of_31_days_is_accepted_and_covers_every_day(client, tenant):
    calendar = await create_calendar(
        client,
        tenant,
        slot_minutes=480,
        max_days_ahead=365,
        availability=[
            {"day": d, "start": "08:00", "end": "16:00"}
            for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
        ],
    )
    first = (utcnow() + timedelta(days=2)).date()

    found = await free_slots(
        client, tenant, calendar["id"], first.isoformat(), (first + timedelta(days=30)).isoformat()
    )

    assert [slot["start"][:10] for slot in found] == [
        (first + timedelta(days=n)).isoformat() for n in range(31)
    ]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"to": "2026-12-01"}, "from"),
        ({"from": "2026-12-01"}, "to"),
        ({"from": "2026-12-1", "to": "2026-12-01"}, "from"),
        ({"from": "2026-13-01", "to": "2026-12-01"}, "from"),
        ({"from": "2026-02-30", "to": "2026-12-01"}, "from"),
        ({"from": "tomorrow", "to": "2026-12-01"}, "from"),
        ({"from": "2026-12-01", "to": "2026-12-01T00:00:00Z"}, "to"),
        ({"from": "2026-12-01", "to": ""}, "to"),
        ({"from": "2026-12-02", "to": "2026-12-01"}, "to"),
        ({"from": "2026-12-01", "to": "2027-01-01"}, "to"),
        ({"from": "0001-01-01", "to": "9999-12-31"}, "to"),
    ],
)
async def test_bad_days_are_400_naming_them(client, tenant, query, field):
    calendar = await create_calendar(client, tenant)

    answer = await expect_error(
        await get(client, tenant, calendar["id"], **query), 400, "validation_error"
    )
    assert answer["error"]["details"][0]["field"] == field


async def test_far_past_and_far_future_days_have_no_slots(client, tenant):
    calendar = await create_calendar(client, tenant)
    for first, last in (("0001-01-01", "0001-01-31"), ("9999-12-01", "9999-12-31")):
        assert await free_slots(client, tenant, calendar["id"], first, last) == []


async def test_unknown_calendar_is_404(client, tenant):
    response = await get(
        client, tenant, str(uuid.uuid4()), **{"from": in_days(1), "to": in_days(1)}
    )
    await expect_error(response, 404, "not_found")


async def test_min_notice_and_max_days_ahead_bound_the_slots(client, tenant):
    calendar = await create_calendar(
        client, tenant, slot_minutes=60, min_notice_minutes=24 * 60, max_days_ahead=3
    )
    now = utcnow()

    found = await free_slots(client, tenant, calendar["id"], in_days(0), in_days(5))

    starts = [datetime.fromisoformat(slot["start"]) for slot in found]
    assert starts[0] >= now + timedelta(days=1)
    assert starts[0] < now + timedelta(days=1, hours=1, seconds=5)
    assert starts[-1] <= utcnow() + timedelta(days=3)
    assert starts[-1] > now + timedelta(days=3, hours=-1, seconds=-5)


async def test_a_booking_takes_its_slot_and_the_buffer_around_it(client, tenant):
    calendar = await create_calendar(
        client,
        tenant,
        slot_minutes=30,
        buffer_minutes=0,
        availability=[
            {"day": d, "start": "09:00", "end": "12:00"}
            for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
        ],
    )
    contact_id = await create_contact(client, tenant)
    day = in_days(4)
    before = await free_slots(client, tenant, calendar["id"], day)
    await book(client, tenant, calendar["id"], contact_id, before[2]["start"])  # 10:00-10:30
    # With a 15-minute buffer the grid steps 45 minutes (09:00, 09:45, 10:30, 11:15), and
    # 09:45 and 10:30 come within 15 minutes of the booking.
    await client.patch(
        f"{CALENDARS}/{calendar['id']}", json={"buffer_minutes": 15}, headers=tenant.headers
    )

    after = await free_slots(client, tenant, calendar["id"], day)

    assert [slot["start"][11:16] for slot in before] == [
        "09:00",
        "09:30",
        "10:00",
        "10:30",
        "11:00",
        "11:30",
    ]
    assert [slot["start"][11:16] for slot in after] == ["09:00", "11:15"]


async def test_a_cancelled_appointment_frees_its_slot(client, tenant):
    calendar = await create_calendar(client, tenant)
    contact_id = await create_contact(client, tenant)
    day = in_days(3)
    before = await free_slots(client, tenant, calendar["id"], day)
    booked = await book(client, tenant, calendar["id"], contact_id, before[5]["start"])
    assert before[5] not in await free_slots(client, tenant, calendar["id"], day)

    await client.patch(
        f"{APPOINTMENTS}/{booked['id']}", json={"status": "cancelled"}, headers=tenant.headers
    )

    assert await free_slots(client, tenant, calendar["id"], day) == before


async def test_the_service_takes_an_injected_now_across_a_dst_change(client, tenant, pool):
    calendar = await create_calendar(
        client,
        tenant,
        timezone="America/New_York",
        slot_minutes=60,
        min_notice_minutes=60,
        availability=[{"day": "sun", "start": "00:00", "end": "04:00"}],
    )
    now = datetime(2026, 3, 7, 12, tzinfo=UTC)

    async with scope_of(pool, tenant).transaction() as conn:
        _, spring, _ = await service.free_slots(
            conn, uuid.UUID(calendar["id"]), date(2026, 3, 8), date(2026, 3, 8), now
        )
        _, fall, _ = await service.free_slots(
            conn, uuid.UUID(calendar["id"]), date(2026, 11, 1), date(2026, 11, 1), now
        )

    assert [slot.start.strftime("%H:%M") for slot in spring] == ["05:00", "06:00", "07:00"]
    assert [slot.start.strftime("%H:%M") for slot in fall] == []  # past max_days_ahead (60)


async def test_next_free_slots_walks_later_days_up_to_the_limit(client, tenant, pool):
    calendar = await create_calendar(
        client,
        tenant,
        slot_minutes=60,
        max_days_ahead=365,
        availability=[{"day": "wed", "start": "09:00", "end": "12:00"}],
    )
    now = datetime(2026, 1, 5, 8, tzinfo=UTC)  # a Monday

    _, found = await service.next_free_slots(
        scope_of(pool, tenant), uuid.UUID(calendar["id"]), now=now, limit=10
    )

    assert [slot.start.isoformat()[:13] for slot in found] == [
        f"2026-01-{day:02d}T{hour:02d}" for day in (7, 14, 21) for hour in (9, 10, 11)
    ] + ["2026-01-28T09"]


# --- the answer is bounded (CONTRACT 18a) -------------------------------------------------------

WEEK = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# 50 overlapping windows, each starting a minute later than the one before on its weekday: with
# 5-minute slots almost every minute of every day starts a slot (the range holds ~44,000).
MANY_WINDOWS = [
    {"day": WEEK[n % 7], "start": f"{n // 7:02d}:{n // 7:02d}", "end": "24:00"} for n in range(50)
]


async def test_a_range_holding_more_than_2000_slots_answers_the_2000_earliest_truncated(
    client, tenant, pool, monkeypatch
):
    calendar = await create_calendar(
        client, tenant, slot_minutes=5, max_days_ahead=60, availability=MANY_WINDOWS
    )
    first = (utcnow() + timedelta(days=1)).date()
    last = first + timedelta(days=30)
    rules = service.rules_of({**calendar, "id": uuid.UUID(calendar["id"])})
    everything = slots.free_slots(rules, first, last, utcnow(), [])
    assert len(everything) > 40_000
    # Count the grid slots the request lays out: the work, not only the answer, is bounded.
    laid_out = 0
    window_slots = slots._window_slots

    def counted(*args: Any) -> Any:
        nonlocal laid_out
        for slot in window_slots(*args):
            laid_out += 1
            yield slot

    monkeypatch.setattr(slots, "_window_slots", counted)

    response = await get(
        client, tenant, calendar["id"], **{"from": first.isoformat(), "to": last.isoformat()}
    )

    answer = await response.get_json()
    assert response.status_code == 200
    assert answer["truncated"] is True
    assert len(answer["slots"]) == slots.MAX_SLOTS == 2000
    assert [slot["start"] for slot in answer["slots"]] == [
        service.slot_out(slot, rules.zone)["start"] for slot in everything[:2000]
    ]
    # 2,001 free slots, the duplicates the overlapping windows give, and one slot ahead per
    # window of the last day reached: a small share of the ~44,000 the range holds.
    assert laid_out < 3 * 2001 < len(everything) / 5


async def test_a_range_holding_2000_slots_or_fewer_is_not_truncated(client, tenant):
    calendar = await create_calendar(client, tenant, slot_minutes=30)
    day = in_days(2)

    response = await get(client, tenant, calendar["id"], **{"from": day, "to": day})

    answer = await response.get_json()
    assert response.status_code == 200
    assert (len(answer["slots"]), answer["truncated"]) == (48, False)


@pytest.mark.parametrize(("last_end", "truncated"), [("22:40", False), ("22:45", True)])
async def test_truncated_is_true_only_past_2000(client, tenant, last_end, truncated):
    # 5-minute slots: six whole days hold 6 x 288 = 1,728, and the seventh 00:00-22:40 another
    # 272 (2,000 in all); to 22:45 it holds one more.
    first = (utcnow() + timedelta(days=1)).date()
    seventh = first + timedelta(days=6)
    availability = [
        {
            "day": day,
            "start": "00:00",
            "end": last_end if day == WEEK[seventh.weekday()] else "24:00",
        }
        for day in WEEK
    ]
    calendar = await create_calendar(client, tenant, slot_minutes=5, availability=availability)

    response = await get(
        client, tenant, calendar["id"], **{"from": first.isoformat(), "to": seventh.isoformat()}
    )

    answer = await response.get_json()
    assert (len(answer["slots"]), answer["truncated"]) == (2000, truncated)
