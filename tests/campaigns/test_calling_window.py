"""The calling window's arithmetic (api/campaigns/business_hours.py, shared with business hours):
local wall-clock days, start and end in the window's timezone, across daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from api.campaigns.business_hours import DAYS, parse

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata"]


def window(zone: str, days: list[str], start: str, end: str):
    return parse({"timezone": zone, "days": days, "start": start, "end": end})


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_berlin_weekdays_after_friday_close_open_monday_in_summer_time():
    # Friday 27 March 2026, 18:00 CET; clocks go forward on Sunday 29 March.
    hours = window("Europe/Berlin", ["mon", "tue", "wed", "thu", "fri"], "09:00", "17:00")
    assert not hours.is_open(utc(2026, 3, 27, 17))
    assert hours.next_opening(utc(2026, 3, 27, 17)) == utc(2026, 3, 30, 7)  # 09:00 CEST


def test_new_york_window_keeps_local_time_when_clocks_fall_back():
    hours = window("America/New_York", list(DAYS), "09:00", "17:00")
    # 08:00 EDT on Saturday 31 October 2026, then 08:00 EST on Monday 2 November.
    assert hours.next_opening(utc(2026, 10, 31, 12)) == utc(2026, 10, 31, 13)
    assert hours.next_opening(utc(2026, 11, 2, 13)) == utc(2026, 11, 2, 14)
    assert hours.is_open(utc(2026, 11, 2, 14)) and not hours.is_open(utc(2026, 11, 2, 22))


def test_a_start_in_the_skipped_hour_opens_when_the_clock_jumps():
    # 02:30 does not exist in New York on 8 March 2026: the window opens at 03:30 EDT.
    hours = window("America/New_York", ["sun"], "02:30", "05:00")
    opening = hours.next_opening(utc(2026, 3, 8, 5))
    assert opening == utc(2026, 3, 8, 7, 30)
    assert hours.is_open(opening)


def test_an_open_moment_is_its_own_opening():
    hours = window("Asia/Kolkata", ["wed"], "10:00", "10:30")
    moment = utc(2026, 12, 2, 4, 45)  # Wednesday 10:15 IST
    assert hours.is_open(moment) and hours.next_opening(moment) == moment
    assert not hours.is_open(moment + timedelta(minutes=15))  # the end is not inside


times = st.integers(min_value=0, max_value=23 * 60 + 58)
moments = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    days=st.lists(st.sampled_from(DAYS), min_size=1, max_size=7, unique=True),
    start=times,
    length=st.integers(min_value=1, max_value=24 * 60 - 1),
    moment=moments,
)
def test_next_opening_is_the_first_open_moment(zone, days, start, length, moment):
    end = min(start + length, 23 * 60 + 59)
    hours = window(
        zone, days, f"{start // 60:02d}:{start % 60:02d}", f"{end // 60:02d}:{end % 60:02d}"
    )
    opening = hours.next_opening(moment)
    assert moment <= opening <= moment + timedelta(days=8)
    local = opening.astimezone(hours.zone)
    # Open then, unless the window's start fell in a skipped hour and the jump passed its end.
    assert hours.is_open(opening) or local.time() >= hours.end
    # Nothing was open before it: every quarter hour between the moment and the opening is shut.
    probe = moment
    while probe < opening - timedelta(minutes=1):
        assert not hours.is_open(probe)
        probe += timedelta(minutes=15)
