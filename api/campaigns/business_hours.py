"""Business hours of a campaign: `{timezone, days, start, end}`, and when sending may happen.

`timezone` is an IANA name, `days` a non-empty list of `mon`..`sun`, `start` and `end` are
`HH:MM` (24 h) with start before end, on the same day in that timezone. Sends happen only while
the local time is on one of the days and in [start, end); the rest waits for the next opening.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from api import timezones

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
FIELDS = {"timezone", "days", "start", "end"}


@dataclass(frozen=True)
class BusinessHours:
    zone: ZoneInfo
    days: frozenset[int]
    start: time
    end: time

    def is_open(self, moment: datetime) -> bool:
        local = moment.astimezone(self.zone)
        return local.weekday() in self.days and self.start <= local.time() < self.end

    def next_opening(self, moment: datetime) -> datetime:
        """`moment` itself when open, else the next start of a window (aware, in UTC)."""
        if self.is_open(moment):
            return moment
        local = moment.astimezone(self.zone)
        for offset in range(8):
            day = local.date() + timedelta(days=offset)
            if day.weekday() not in self.days:
                continue
            opening = datetime.combine(day, self.start, tzinfo=self.zone)
            # Round-trip through UTC so a start inside a DST gap lands on a real instant.
            opening = opening.astimezone(UTC).astimezone(self.zone)
            if opening > local:
                return opening.astimezone(UTC)
        raise AssertionError("a week always has an opening")


def validate_config(config: Any, name: str = "business_hours_config") -> list[dict[str, str]]:
    """The problems with an hours object (a campaign's business_hours_config, or the calling
    window of a call campaign, named `name` in the problems), empty when it is valid."""
    if not isinstance(config, dict):
        return [{"field": name, "message": "must be an object", "type": "dict_type"}]

    def _problem(field: str, message: str) -> dict[str, str]:
        return {"field": f"{name}.{field}", "message": message, "type": "value_error"}

    problems = [_problem(key, "unknown field") for key in sorted(set(config) - FIELDS)]
    problems += [_problem(key, "field required") for key in sorted(FIELDS - set(config))]
    zone = config.get("timezone")
    if "timezone" in config and not _is_zone(zone):
        problems.append(_problem("timezone", "must be an IANA timezone name"))
    days = config.get("days")
    if "days" in config and not (
        isinstance(days, list) and days and all(isinstance(d, str) and d in DAYS for d in days)
    ):
        problems.append(_problem("days", "must be a non-empty list of " + ", ".join(DAYS)))
    for key in ("start", "end"):
        value = config.get(key)
        if key in config and not (isinstance(value, str) and HHMM.fullmatch(value)):
            problems.append(_problem(key, "must be HH:MM (24 hour)"))
    start, end = config.get("start"), config.get("end")
    if (
        isinstance(start, str)
        and HHMM.fullmatch(start)
        and isinstance(end, str)
        and HHMM.fullmatch(end)
        and start >= end
    ):
        problems.append(_problem("end", "must be after start"))
    return problems


def _is_zone(value: Any) -> bool:
    """An IANA name (api/timezones.py): never `localtime`, `Factory` or a path."""
    return timezones.is_timezone(value)


def normalised(config: dict[str, Any]) -> dict[str, Any]:
    """The stored form: days de-duplicated in week order."""
    return {
        "timezone": config["timezone"],
        "days": [day for day in DAYS if day in config["days"]],
        "start": config["start"],
        "end": config["end"],
    }


def parse(config: dict[str, Any]) -> BusinessHours:
    start_h, start_m = (int(part) for part in config["start"].split(":"))
    end_h, end_m = (int(part) for part in config["end"].split(":"))
    return BusinessHours(
        ZoneInfo(config["timezone"]),
        frozenset(DAYS.index(day) for day in config["days"]),
        time(start_h, start_m),
        time(end_h, end_m),
    )
