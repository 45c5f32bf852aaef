"""IANA timezone names (CONTRACT 10, 18a): the one allow list of every field that takes a
timezone (calendars, agents, campaigns' business hours and calling windows).

The names are zoneinfo's (the system's tz database, else the tzdata package), less the files
there that are no zone of the IANA database: `localtime` (the host's own setting), `posixrules`
(a template of the POSIX rules) and `Factory` (a placeholder zone for machines not yet set up).
A path (`../etc`, `/etc/localtime`) or any other name is not in it. Computed once.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any
from zoneinfo import available_timezones

from pydantic import AfterValidator, StrictStr

from api.types import Documented

NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})
MESSAGE = "must be an IANA timezone name, such as Europe/London or UTC"


@cache
def names() -> frozenset[str]:
    """Every IANA timezone name this system knows."""
    return frozenset(available_timezones()) - NOT_ZONES


def is_timezone(value: Any) -> bool:
    return isinstance(value, str) and value in names()


def check(value: str) -> str:
    """A pydantic AfterValidator: `value`, if it is an IANA timezone name."""
    if not is_timezone(value):
        raise ValueError(MESSAGE)
    return value


Timezone = Annotated[StrictStr, AfterValidator(check), Documented(enum=sorted(names()))]
