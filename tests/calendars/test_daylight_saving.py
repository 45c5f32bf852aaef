"""Windows are local wall-clock time across daylight-saving changes (CONTRACT 10): a local time
skipped by the change is no slot, a repeated one is a slot at its first occurrence, and a slot
ends by the first moment the local clock shows the window's end. Days in both directions in
America/New_York, Europe/London, Australia/Lord_Howe (a 30-minute change) and America/Santiago
(changes at midnight), checked start by start against hand-worked UTC times."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from api.calendars import slots
from api.calendars.service import slot_out

NOW = datetime(2026, 1, 1, tzinfo=UTC)  # long before every day below


def rules(zone: str, day: date, start: str, end: str, slot: int, buffer: int = 0) -> slots.Rules:
    window = slots.Window(day.weekday(), slots.minutes_of(start), slots.minutes_of(end))
    return slots.Rules(ZoneInfo(zone), slot, buffer, 0, 365, (window,))


def starts(found: list[slots.Slot]) -> list[str]:
    return [slot.start.strftime("%H:%MZ") for slot in found]


def local_starts(found: list[slots.Slot], zone: str) -> list[str]:
    return [slot_out(slot, ZoneInfo(zone))["start_local"] for slot in found]


def free(
    zone: str,
    day: date,
    start: str,
    end: str,
    slot: int,
    buffer: int = 0,
    booked: list[tuple[datetime, datetime]] | None = None,
) -> list[slots.Slot]:
    return slots.free_slots(rules(zone, day, start, end, slot, buffer), day, day, NOW, booked or [])


# --- America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST ---

SPRING_NY, FALL_NY = date(2026, 3, 8), date(2026, 11, 1)


def test_new_york_spring_forward_skips_the_missing_hour() -> None:
    found = free("America/New_York", SPRING_NY, "00:00", "06:00", 60)

    assert starts(found) == ["05:00Z", "06:00Z", "07:00Z", "08:00Z", "09:00Z"]
    assert local_starts(found, "America/New_York") == [
        "2026-03-08T00:00:00-05:00",
        "2026-03-08T01:00:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T04:00:00-04:00",
        "2026-03-08T05:00:00-04:00",
    ]


def test_new_york_spring_forward_slot_ends_in_real_time() -> None:
    # 01:00 EST + 60 min is 03:00 EDT: the window to 02:30 (a time that day never shows) has
    # ended at 02:00 EST; 00:00 and 01:00 fit, a 90-minute slot at 01:30 would not.
    assert starts(free("America/New_York", SPRING_NY, "00:00", "02:30", 60)) == ["05:00Z", "06:00Z"]
    assert starts(free("America/New_York", SPRING_NY, "00:00", "02:30", 90)) == ["05:00Z"]


def test_new_york_window_ending_in_the_gap_ends_at_the_jump() -> None:
    # 01:30 EST + 60 min is 03:30 EDT: past 02:30, which the clock never shows; the window
    # ended when the clock jumped (03:00 EDT), not at 02:30 read with either offset.
    assert starts(free("America/New_York", SPRING_NY, "00:30", "02:30", 60)) == ["05:30Z"]
    assert starts(free("America/New_York", SPRING_NY, "00:30", "03:00", 60)) == ["05:30Z"]
    assert starts(free("America/New_York", SPRING_NY, "00:30", "03:30", 60)) == ["05:30Z", "06:30Z"]


def test_new_york_spring_forward_window_starting_in_the_gap() -> None:
    # 02:30 does not exist: skipped; the grid goes on in wall-clock time from it.
    found = free("America/New_York", SPRING_NY, "02:30", "05:00", 30)

    assert local_starts(found, "America/New_York") == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
        "2026-03-08T04:00:00-04:00",
        "2026-03-08T04:30:00-04:00",
    ]


def test_new_york_fall_back_offers_the_repeated_hour_once() -> None:
    found = free("America/New_York", FALL_NY, "00:00", "04:00", 60)

    # 01:00 is its first occurrence (EDT, 05:00Z); 01:00 EST (06:00Z) is no slot.
    assert starts(found) == ["04:00Z", "05:00Z", "07:00Z", "08:00Z"]
    assert local_starts(found, "America/New_York") == [
        "2026-11-01T00:00:00-04:00",
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T02:00:00-05:00",
        "2026-11-01T03:00:00-05:00",
    ]


def test_new_york_fall_back_window_ending_in_the_repeated_hour() -> None:
    # The window ends the first time the clock shows 01:30 (EDT).
    assert starts(free("America/New_York", FALL_NY, "00:00", "01:30", 30)) == [
        "04:00Z",
        "04:30Z",
        "05:00Z",
    ]


def test_new_york_fall_back_window_is_an_hour_longer_in_real_time() -> None:
    # 01:30 EDT to 03:00 EST is 2.5 hours: a 120-minute slot at 01:30 EDT fits.
    assert starts(free("America/New_York", FALL_NY, "01:30", "03:00", 120)) == ["05:30Z"]


def test_new_york_ordinary_day_is_unchanged() -> None:
    found = free("America/New_York", date(2026, 3, 9), "09:00", "11:00", 30, buffer=15)

    assert local_starts(found, "America/New_York") == [
        "2026-03-09T09:00:00-04:00",
        "2026-03-09T09:45:00-04:00",
        "2026-03-09T10:30:00-04:00",
    ]


# --- Europe/London: 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT ------


def test_london_spring_forward() -> None:
    found = free("Europe/London", date(2026, 3, 29), "00:00", "03:00", 30)

    assert starts(found) == ["00:00Z", "00:30Z", "01:00Z", "01:30Z"]
    assert local_starts(found, "Europe/London")[2:] == [
        "2026-03-29T02:00:00+01:00",
        "2026-03-29T02:30:00+01:00",
    ]


def test_london_fall_back() -> None:
    found = free("Europe/London", date(2026, 10, 25), "00:30", "02:00", 30)

    # 00:30 and 01:00, 01:30 in BST (23:30Z, 00:00Z, 00:30Z); the window ends at 02:00 GMT.
    assert starts(found) == ["23:30Z", "00:00Z", "00:30Z"]
    assert local_starts(found, "Europe/London") == [
        "2026-10-25T00:30:00+01:00",
        "2026-10-25T01:00:00+01:00",
        "2026-10-25T01:30:00+01:00",
    ]


# --- Australia/Lord_Howe: +10:30 / +11:00, a 30-minute change --------------------------------
# 2026-10-04 02:00 -> 02:30 (02:00-02:29 skipped); 2026-04-05 02:00 -> 01:30 (repeated).


def test_lord_howe_spring_forward_skips_half_an_hour() -> None:
    found = free("Australia/Lord_Howe", date(2026, 10, 4), "01:00", "04:00", 30)

    assert local_starts(found, "Australia/Lord_Howe") == [
        "2026-10-04T01:00:00+10:30",
        "2026-10-04T01:30:00+10:30",
        "2026-10-04T02:30:00+11:00",
        "2026-10-04T03:00:00+11:00",
        "2026-10-04T03:30:00+11:00",
    ]


def test_lord_howe_fall_back_repeats_half_an_hour_once() -> None:
    found = free("Australia/Lord_Howe", date(2026, 4, 5), "01:00", "03:00", 30)

    assert local_starts(found, "Australia/Lord_Howe") == [
        "2026-04-05T01:00:00+11:00",
        "2026-04-05T01:30:00+11:00",
        "2026-04-05T02:00:00+10:30",
        "2026-04-05T02:30:00+10:30",
    ]
    assert starts(found) == ["14:00Z", "14:30Z", "15:30Z", "16:00Z"]


# --- America/Santiago: the clock changes at midnight -------------------------------------------
# 2026-09-06 00:00 -> 01:00 (that midnight never shows); 2026-04-05 00:00 -> 2026-04-04 23:00.


def test_santiago_day_whose_midnight_is_skipped() -> None:
    found = free("America/Santiago", date(2026, 9, 6), "00:00", "02:00", 30)

    assert local_starts(found, "America/Santiago") == [
        "2026-09-06T01:00:00-03:00",
        "2026-09-06T01:30:00-03:00",
    ]


def test_santiago_window_to_a_midnight_that_is_skipped() -> None:
    # The window of 2026-09-05 to 24:00 ends when the clock jumps from 23:59:59 to 01:00.
    found = free("America/Santiago", date(2026, 9, 5), "23:00", "24:00", 30)

    assert local_starts(found, "America/Santiago") == [
        "2026-09-05T23:00:00-04:00",
        "2026-09-05T23:30:00-04:00",
    ]


def test_santiago_repeated_hour_before_midnight() -> None:
    found = free("America/Santiago", date(2026, 4, 4), "22:00", "24:00", 60)

    # 23:00 at its first occurrence (-03:00); the window ends the first moment the clock shows
    # midnight, which is after the repeated hour (00:00 -04:00): two hours of real time.
    assert local_starts(found, "America/Santiago") == [
        "2026-04-04T22:00:00-03:00",
        "2026-04-04T23:00:00-03:00",
    ]
    assert found[-1].end - found[0].start == timedelta(hours=2)


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        ("America/New_York", SPRING_NY),
        ("America/New_York", FALL_NY),
        ("Europe/London", date(2026, 3, 29)),
        ("Australia/Lord_Howe", date(2026, 10, 4)),
    ],
)
def test_a_booked_slot_and_its_buffer_are_taken_out_on_change_days(zone: str, day: date) -> None:
    everything = free(zone, day, "00:00", "24:00", 30, buffer=30)
    taken = everything[3]

    found = free(zone, day, "00:00", "24:00", 30, buffer=30, booked=[(taken.start, taken.end)])

    assert taken not in found
    assert all(
        slot.end + timedelta(minutes=30) <= taken.start
        or slot.start >= taken.end + timedelta(minutes=30)
        for slot in found
    )
    assert len(found) == len(everything) - 1  # the grid keeps the buffer between slots already
