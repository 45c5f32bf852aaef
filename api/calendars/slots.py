"""Free-slot arithmetic of a calendar (CONTRACT 10), free of I/O: a job, the voice runtime and
the property tests call it as the routes do (through api.calendars.service).

Time model (docs/calendars.md):
- A window `{day, start, end}` is wall-clock time in the calendar's timezone on each local date
  of that weekday. It runs from the first moment the local clock shows `start` to the first
  moment it shows `end` (24:00 is the next midnight); a daylight-saving change inside it makes it
  an hour shorter or longer in real time.
- Slot starts are the wall-clock times `start + k x (slot_minutes + buffer_minutes)`. A time
  that does not exist that day (skipped by a spring-forward change) is no slot; a time that
  exists twice (repeated by a fall-back change) is a slot at its first occurrence only, as
  RFC 5545 reads such times.
- A slot lasts slot_minutes of real time and must end by the window's end; it starts at least
  min_notice_minutes and at most max_days_ahead x 24 h after now; it keeps buffer_minutes clear
  of every booked appointment: no appointment ends after start - buffer or starts before
  end + buffer.

`candidates` lays out the grid; `free` removes what the appointments block, in one sweep over
both sorted lists (never a query or a scan per slot). Both run lazily (`grid`, `sweep`), so a
caller that wants only the first slots (an answer holds at most MAX_SLOTS, CONTRACT 18a) stops
the work once it has them, however many windows and days the range holds.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MINUTES_PER_DAY = 24 * 60
# The most free slots one answer holds (CONTRACT 18a), earliest first.
MAX_SLOTS = 2000


@dataclass(frozen=True)
class Window:
    weekday: int  # Monday is 0, as date.weekday() counts
    start: int  # minutes after local midnight
    end: int  # minutes after local midnight, up to 1440 (24:00)


@dataclass(frozen=True)
class Rules:
    """What of a calendar decides its slots."""

    zone: ZoneInfo
    slot_minutes: int
    buffer_minutes: int
    min_notice_minutes: int
    max_days_ahead: int
    windows: tuple[Window, ...]

    @property
    def step(self) -> timedelta:
        return timedelta(minutes=self.slot_minutes + self.buffer_minutes)


class Slot(NamedTuple):
    start: datetime  # aware, UTC
    end: datetime  # aware, UTC

    def start_local(self, zone: ZoneInfo) -> datetime:
        return self.start.astimezone(zone)


def minutes_of(text: str) -> int:
    """ "HH:MM" (00:00 to 24:00) as minutes after midnight."""
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def windows_of(availability: Iterable[dict[str, str]]) -> tuple[Window, ...]:
    return tuple(
        Window(DAYS.index(window["day"]), minutes_of(window["start"]), minutes_of(window["end"]))
        for window in availability
    )


def instant(zone: ZoneInfo, local: datetime) -> datetime | None:
    """The first moment the local clock shows `local` (naive), in UTC; None when it never does
    (a time skipped by a daylight-saving change)."""
    found = local.replace(tzinfo=zone).astimezone(UTC)  # fold=0: the first occurrence
    if found.astimezone(zone).replace(tzinfo=None) != local:
        return None
    return found


def reached(zone: ZoneInfo, local: datetime) -> datetime:
    """The first moment the local clock shows `local` (naive) or later, in UTC: `instant`, or
    for a skipped time the moment of the change that skipped it."""
    found = instant(zone, local)
    if found is not None:
        return found
    # Inside a gap: the offsets before and after the change bracket the moment it happens.
    first, second = (local.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1))
    low, high = min(first, second), max(first, second)
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if middle.astimezone(zone).replace(tzinfo=None) >= local:
            high = middle
        else:
            low = middle
    return high


def horizon(rules: Rules, now: datetime) -> tuple[datetime, datetime]:
    """The earliest and latest start a slot may have (inclusive)."""
    return (
        now + timedelta(minutes=rules.min_notice_minutes),
        now + timedelta(days=rules.max_days_ahead),
    )


def bookable_days(rules: Rules, from_day: date, to_day: date, now: datetime) -> list[date]:
    """The local dates of [from_day, to_day] on which a slot could start at all (a day's slots
    start that day, local time), so far-off ranges cost nothing (and never overflow). A day of
    margin on each side: a clock set back across midnight can date a later moment earlier."""
    earliest, latest = horizon(rules, now)
    first = max(from_day, earliest.astimezone(rules.zone).date() - timedelta(days=1))
    last = min(to_day, latest.astimezone(rules.zone).date() + timedelta(days=1))
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def _window_slots(rules: Rules, day: date, window: Window) -> Iterable[Slot]:
    zone, step = rules.zone, rules.step
    length = timedelta(minutes=rules.slot_minutes)
    midnight = datetime.combine(day, time())
    ends = reached(zone, midnight + timedelta(minutes=window.end))
    local = midnight + timedelta(minutes=window.start)
    last = midnight + timedelta(minutes=window.end)
    start: datetime | None = None
    while local < last:
        # While the offset holds, the next grid time is the previous instant plus a step: one
        # conversion confirms it (the clock shows `local` then, not as a repeat); else look it up
        # afresh.
        if start is not None and _shows(start + step, zone, local):
            start += step
        else:
            start = instant(zone, local)
        if start is not None:
            if start + length > ends:
                return  # first occurrences rise with wall-clock time: later ones end later
            yield Slot(start, start + length)
        local += step


def _shows(moment: datetime, zone: ZoneInfo, local: datetime) -> bool:
    """Whether the clock shows `local` (naive) at `moment`, and for the first time."""
    shown = moment.astimezone(zone)
    return (
        shown.fold == 0
        and shown.minute == local.minute
        and shown.hour == local.hour
        and shown.day == local.day
        and shown.second == local.second
    )


def grid(rules: Rules, from_day: date, to_day: date, now: datetime) -> Iterator[Slot]:
    """The grid of every window on [from_day, to_day] inside the horizon, ascending, each start
    once (windows may overlap), computed only as far as it is read. A day's slots start that
    day, local time, and first occurrences rise with wall-clock time, so the days come in order
    and each day's windows (each ascending) merge into one ascending run."""
    earliest, latest = horizon(rules, now)
    by_weekday: dict[int, list[Window]] = {}
    for window in rules.windows:
        by_weekday.setdefault(window.weekday, []).append(window)
    previous: datetime | None = None
    for day in bookable_days(rules, from_day, to_day, now):
        windows = by_weekday.get(day.weekday(), ())
        for slot in heapq.merge(*(_window_slots(rules, day, window) for window in windows)):
            if slot.start > latest:
                return  # ascending: every later slot is later still
            if slot.start < earliest or slot.start == previous:
                continue
            previous = slot.start
            yield slot


def candidates(rules: Rules, from_day: date, to_day: date, now: datetime) -> list[Slot]:
    """The whole `grid` of [from_day, to_day] as a list."""
    return list(grid(rules, from_day, to_day, now))


def blocked(
    appointments: Iterable[tuple[datetime, datetime]], buffer_minutes: int
) -> list[tuple[datetime, datetime]]:
    """The spans no slot may touch: each booked appointment widened by the buffer on both
    sides, sorted and merged into disjoint spans."""
    buffer = timedelta(minutes=buffer_minutes)
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(appointments):
        low, high = start - buffer, end + buffer
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def sweep(slots: Iterable[Slot], spans: Sequence[tuple[datetime, datetime]]) -> Iterator[Slot]:
    """The slots (ascending) that overlap no span (`blocked`), in one lazy sweep: slots all
    last the same, so their ends rise with their starts, and the spans are disjoint and
    sorted."""
    index = 0
    for slot in slots:
        while index < len(spans) and spans[index][1] <= slot.start:
            index += 1
        if index < len(spans) and spans[index][0] < slot.end:
            continue
        yield slot


def free(slots: Iterable[Slot], spans: Sequence[tuple[datetime, datetime]]) -> list[Slot]:
    """Every slot of `sweep` as a list."""
    return list(sweep(slots, spans))


def free_slots(
    rules: Rules,
    from_day: date,
    to_day: date,
    now: datetime,
    appointments: Iterable[tuple[datetime, datetime]],
    limit: int | None = None,
) -> list[Slot]:
    """The free slots starting on the local dates [from_day, to_day], ascending: the first
    `limit` of them (all when None), computing no more than those."""
    found = sweep(grid(rules, from_day, to_day, now), blocked(appointments, rules.buffer_minutes))
    return list(itertools.islice(found, limit))


def chunks(slots: Iterable[Slot], size: int) -> Iterator[list[Slot]]:
    """`slots` in consecutive lists of `size` (the last one shorter), read as they are asked."""
    iterator = iter(slots)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def span_of(slots: Sequence[Slot], buffer_minutes: int) -> tuple[datetime, datetime] | None:
    """The time span whose booked appointments can block any of `slots` (None: no slots)."""
    if not slots:
        return None
    buffer = timedelta(minutes=buffer_minutes)
    return slots[0].start - buffer, slots[-1].end + buffer


def is_slot_start(slots: Sequence[Slot], start: datetime) -> Slot | None:
    """The slot of `slots` (ascending) that starts exactly at `start`, if any."""
    starts = [slot.start for slot in slots]
    index = bisect.bisect_left(starts, start)
    if index < len(slots) and slots[index].start == start:
        return slots[index]
    return None
