"""Business hours: when a campaign may send, and the next opening when it may not."""

from __future__ import annotations

from datetime import UTC, datetime

from api.campaigns.business_hours import parse, validate_config

OFFICE = {
    "timezone": "America/New_York",
    "days": ["mon", "tue", "wed", "thu", "fri"],
    "start": "09:00",
    "end": "17:00",
}


def test_open_inside_the_window_on_a_listed_day():
    hours = parse(OFFICE)
    # Wednesday 2026-01-07 12:00 in New York is 17:00 UTC.
    assert hours.is_open(datetime(2026, 1, 7, 17, 0, tzinfo=UTC))
    assert not hours.is_open(datetime(2026, 1, 7, 22, 0, tzinfo=UTC))  # 17:00 local: closed


def test_next_opening_later_the_same_day():
    hours = parse(OFFICE)
    assert hours.next_opening(datetime(2026, 1, 7, 12, 0, tzinfo=UTC)) == datetime(
        2026, 1, 7, 14, 0, tzinfo=UTC
    )


def test_next_opening_after_the_weekend():
    hours = parse(OFFICE)
    # Friday 18:00 local -> Monday 09:00 local.
    assert hours.next_opening(datetime(2026, 1, 9, 23, 0, tzinfo=UTC)) == datetime(
        2026, 1, 12, 14, 0, tzinfo=UTC
    )


def test_next_opening_when_open_is_now():
    moment = datetime(2026, 1, 7, 17, 0, tzinfo=UTC)
    assert parse(OFFICE).next_opening(moment) == moment


def test_next_opening_across_a_daylight_saving_change():
    # Sunday 2026-03-08 New York moves to EDT; Monday 09:00 EDT is 13:00 UTC.
    assert parse(OFFICE).next_opening(datetime(2026, 3, 7, 12, 0, tzinfo=UTC)) == datetime(
        2026, 3, 9, 13, 0, tzinfo=UTC
    )


def test_valid_config_has_no_problems():
    assert validate_config(OFFICE) == []


def test_invalid_configs_name_each_bad_field():
    assert {
        p["field"]
        for p in validate_config(
            {"timezone": "Nowhere/Land", "days": [], "start": "25:00", "end": "7pm"}
        )
    } == {
        "business_hours_config.timezone",
        "business_hours_config.days",
        "business_hours_config.start",
        "business_hours_config.end",
    }
    assert validate_config([]) != []
    assert {p["field"] for p in validate_config({"timezone": "UTC"})} == {
        "business_hours_config.days",
        "business_hours_config.start",
        "business_hours_config.end",
    }
