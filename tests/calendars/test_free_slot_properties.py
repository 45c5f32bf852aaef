"""Free slots are exactly the bookable starts (CONTRACT 10), by property: for any calendar, range,
`now` and booked appointments, in timezones with daylight-saving changes, every slot the
arithmetic returns is bookable and every bookable start is returned, once, ascending.

"Bookable" is judged by brute force, minute by minute, straight from the rules as
docs/calendars.md states them, sharing no code with api/calendars/slots.py: a start is bookable
when its local clock time is on a window's grid (window start + k x (slot + buffer), before the
window's end) on a day of the range, it is that clock time's first occurrence, the slot ends by
the first moment the local clock reaches the window's end, it lies between now + min_notice and
now + max_days_ahead x 24 h, and no booked appointment comes within buffer_minutes of it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.calendars import slots

ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Pacific/Chatham",
    "Africa/Casablanca",
    "Europe/Dublin",
    "Asia/Kolkata",
    "UTC",
]
YEAR = 2026


def transition_days(name: str) -> list[date]:
    """The local dates in YEAR on which the zone's offset changes."""
    zone, days = ZoneInfo(name), []
    moment = datetime(YEAR, 1, 1, tzinfo=UTC)
    offset = moment.astimezone(zone).utcoffset()
    while moment.year == YEAR:
        moment += timedelta(minutes=15)
        local = moment.astimezone(zone)
        if local.utcoffset() != offset:
            days.append(local.date())
            offset = local.utcoffset()
    return days


TRANSITIONS = {name: transition_days(name) or [date(YEAR, 3, 8)] for name in ZONES}


def gap_of(name: str, day: date) -> tuple[int, int] | None:
    """The local minutes [first, last] of `day` that its clock skips, if any."""
    zone = ZoneInfo(name)
    midnight = datetime.combine(day, datetime.min.time())
    missing = [
        minute
        for minute in range(1, 1440)
        if (local := midnight + timedelta(minutes=minute))
        .replace(tzinfo=zone)
        .astimezone(UTC)
        .astimezone(zone)
        .replace(tzinfo=None)
        != local
    ]
    return (missing[0], missing[-1]) if missing else None


GAPS = [
    (name, day, gap)
    for name in ZONES
    for day in TRANSITIONS[name]
    if (gap := gap_of(name, day)) is not None
]


# --- the oracle -------------------------------------------------------------------------------


class Clock:
    """The local clock of a zone, read every minute over a span of instants."""

    def __init__(self, zone: ZoneInfo, first: datetime, last: datetime) -> None:
        count = int((last - first).total_seconds() // 60) + 1
        self.instants = [first + timedelta(minutes=n) for n in range(count)]
        self.shown = [moment.astimezone(zone) for moment in self.instants]

    def first_reaching(self, local: datetime) -> datetime:
        """The first instant whose local clock reads `local` (naive) or later."""
        for moment, shown in zip(self.instants, self.shown, strict=True):
            if shown.replace(tzinfo=None) >= local:
                return moment
        raise AssertionError("the span is too short")


def bookable(
    rules: slots.Rules,
    from_day: date,
    to_day: date,
    now: datetime,
    booked: list[tuple[datetime, datetime]],
) -> list[datetime]:
    clock = Clock(
        rules.zone,
        datetime.combine(from_day - timedelta(days=2), datetime.min.time(), UTC),
        datetime.combine(to_day + timedelta(days=3), datetime.min.time(), UTC),
    )
    step = rules.slot_minutes + rules.buffer_minutes
    length = timedelta(minutes=rules.slot_minutes)
    buffer = timedelta(minutes=rules.buffer_minutes)
    window_end: dict[tuple[date, int], datetime] = {}
    found = []
    for moment, shown in zip(clock.instants, clock.shown, strict=True):
        day = shown.date()
        if shown.fold or not from_day <= day <= to_day:
            continue
        minute = shown.hour * 60 + shown.minute
        on_grid = False
        for window in rules.windows:
            if (
                window.weekday != day.weekday()
                or not window.start <= minute < window.end
                or (minute - window.start) % step
            ):
                continue
            key = (day, window.end)
            if key not in window_end:
                window_end[key] = clock.first_reaching(
                    datetime.combine(day, datetime.min.time()) + timedelta(minutes=window.end)
                )
            on_grid = on_grid or moment + length <= window_end[key]
        if not on_grid:
            continue
        if not (
            now + timedelta(minutes=rules.min_notice_minutes)
            <= moment
            <= now + timedelta(days=rules.max_days_ahead)
        ):
            continue
        if any(start - buffer < moment + length and moment < end + buffer for start, end in booked):
            continue
        found.append(moment)
    return found


# --- the strategies ---------------------------------------------------------------------------


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[slots.Rules, date, date, datetime, list[tuple[datetime, datetime]]]:
    windows = []
    if draw(st.integers(0, 2)) == 0:
        # A window that ends inside the minutes a spring-forward change skips, starting before.
        name, around, (first, last) = draw(st.sampled_from(GAPS))
        end = draw(st.integers(first, last))
        windows.append(
            slots.Window(around.weekday(), draw(st.integers(max(0, first - 300), first - 1)), end)
        )
    else:
        name = draw(st.sampled_from(ZONES))
        around = draw(st.sampled_from(TRANSITIONS[name]))
    from_day = around + timedelta(days=draw(st.integers(-1, 0)))
    to_day = from_day + timedelta(days=draw(st.integers(1, 2)))
    days = [from_day + timedelta(days=n) for n in range((to_day - from_day).days + 1)]
    for _ in range(draw(st.integers(0 if windows else 1, 3))):
        weekday = draw(
            st.one_of(st.sampled_from([day.weekday() for day in days]), st.integers(0, 6))
        )
        # Daylight-saving changes happen around midnight to 03:00 local time: windows that
        # start or end there (in a skipped or repeated hour) are drawn often.
        start = draw(st.one_of(st.integers(0, 1439), st.sampled_from([0, 30, 60, 90, 1380])))
        ends = [end for end in (60, 90, 100, 120, 135, 150, 165, 180, 1440) if end > start]
        end = draw(st.one_of(st.integers(start + 1, 1440), st.sampled_from(ends or [1440])))
        windows.append(slots.Window(weekday, start, end))
    rules = slots.Rules(
        zone=ZoneInfo(name),
        slot_minutes=draw(st.one_of(st.sampled_from([5, 15, 30, 60, 90]), st.integers(5, 480))),
        buffer_minutes=draw(
            st.one_of(st.just(0), st.sampled_from([5, 10, 15, 30]), st.integers(0, 240))
        ),
        min_notice_minutes=draw(st.one_of(st.just(0), st.integers(0, 3000))),
        max_days_ahead=draw(st.one_of(st.integers(1, 5), st.just(365))),
        windows=tuple(windows),
    )
    base = datetime.combine(from_day, datetime.min.time(), UTC)
    now = base + timedelta(
        minutes=draw(st.integers(-3 * 1440, 1440)), seconds=draw(st.integers(0, 59))
    )
    booked = []
    for _ in range(draw(st.integers(0, 6))):
        start = base + timedelta(minutes=draw(st.integers(-1440, 4 * 1440)))
        booked.append((start, start + timedelta(minutes=draw(st.integers(5, 480)))))
    return rules, from_day, to_day, now, booked


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_free_slots_are_exactly_the_bookable_starts(case: tuple[Any, ...]) -> None:
    rules, from_day, to_day, now, booked = case

    found = slots.free_slots(rules, from_day, to_day, now, booked)

    assert [slot.start for slot in found] == bookable(rules, from_day, to_day, now, booked)
    for slot in found:
        assert slot.end - slot.start == timedelta(minutes=rules.slot_minutes)
        assert slot.start.tzinfo is UTC


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_span_read_from_the_database_covers_every_blocking_appointment(
    case: tuple[Any, ...],
) -> None:
    """The service reads only the booked appointments overlapping `span_of` the candidate
    slots: leaving out the others changes nothing."""
    rules, from_day, to_day, now, booked = case
    grid = slots.candidates(rules, from_day, to_day, now)
    span = slots.span_of(grid, rules.buffer_minutes)
    read = (
        []
        if span is None
        else [(start, end) for start, end in booked if start < span[1] and span[0] < end]
    )

    assert slots.free(grid, slots.blocked(read, rules.buffer_minutes)) == slots.free_slots(
        rules, from_day, to_day, now, booked
    )
