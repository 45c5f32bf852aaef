"""Request and response models of the calendar operations (CONTRACT 10)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from api.calendars.slots import MAX_SLOTS
from api.schemas import Page
from api.timezones import Timezone
from api.types import (
    NON_BLANK,
    Documented,
    HeaderText,
    WholeNumber,
    document,
    required_one_of,
    when,
)

HHMM = "^([01][0-9]|2[0-3]):[0-5][0-9]$"
HHMM_OR_MIDNIGHT = "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"
DATE_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
MAX_RANGE_DAYS = 31
EDITABLE = (
    "name",
    "timezone",
    "slot_minutes",
    "buffer_minutes",
    "min_notice_minutes",
    "max_days_ahead",
    "availability",
    "reminders",
)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]  # api.calendars.slots.DAYS
Name = Annotated[HeaderText, Field(min_length=1, max_length=200), AfterValidator(_non_blank)]
TimeZoneName = Timezone  # api/timezones.py: IANA names only
Template = Annotated[
    StrictStr, Field(max_length=1000), AfterValidator(_non_blank), Documented(**NON_BLANK)
]
SlotMinutes = Annotated[WholeNumber, Field(ge=5, le=480)]
BufferMinutes = Annotated[WholeNumber, Field(ge=0, le=240)]
NoticeMinutes = Annotated[WholeNumber, Field(ge=0, le=43_200)]
DaysAhead = Annotated[WholeNumber, Field(ge=1, le=365)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AvailabilityWindow(Strict):
    """Wall-clock hours on one weekday in the calendar's timezone; end after start."""

    day: Day
    start: Annotated[StrictStr, Field(pattern=HHMM)]
    end: Annotated[StrictStr, Field(pattern=HHMM_OR_MIDNIGHT)]

    @field_validator("end")
    @classmethod
    def _after_start(cls, end: str, info: ValidationInfo) -> str:
        start = info.data.get("start")
        if start is not None and end <= start:
            raise ValueError("must be after start")
        return end


class Reminder(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(
            all_of=[when("channel", ["sms"], {"properties": {"subject": {"type": "null"}}})]
        )
    )

    minutes_before: WholeNumber = Field(ge=1, le=10_080)
    channel: Literal["sms", "email"]
    template: Template
    subject: Annotated[HeaderText, Field(min_length=1, max_length=998)] | None = None

    @field_validator("subject")
    @classmethod
    def _email_only(cls, subject: str | None, info: ValidationInfo) -> str | None:
        if subject is not None and info.data.get("channel") == "sms":
            raise ValueError("only email reminders have a subject")
        return subject


Availability = Annotated[list[AvailabilityWindow], Field(min_length=1, max_length=50)]
Reminders = Annotated[list[Reminder], Field(max_length=5)]


class CreateCalendarRequest(Strict):
    name: Name
    timezone: TimeZoneName
    slot_minutes: SlotMinutes = 30
    buffer_minutes: BufferMinutes = 0
    min_notice_minutes: NoticeMinutes = 60
    max_days_ahead: DaysAhead = 60
    availability: Availability
    reminders: Reminders = []


class UpdateCalendarRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(not_null=EDITABLE, any_of=required_one_of(*EDITABLE))
    )

    name: Name | None = None
    timezone: TimeZoneName | None = None
    slot_minutes: SlotMinutes | None = None
    buffer_minutes: BufferMinutes | None = None
    min_notice_minutes: NoticeMinutes | None = None
    max_days_ahead: DaysAhead | None = None
    availability: Availability | None = None
    reminders: Reminders | None = None


class WindowOut(BaseModel):
    day: str
    start: str
    end: str


class ReminderOut(BaseModel):
    minutes_before: int
    channel: str
    template: str
    subject: str | None


class Calendar(BaseModel):
    id: uuid.UUID
    name: str
    timezone: str
    slot_minutes: int
    buffer_minutes: int
    min_notice_minutes: int
    max_days_ahead: int
    availability: list[WindowOut]
    reminders: list[ReminderOut]
    created_at: datetime
    updated_at: datetime


class CalendarResponse(BaseModel):
    status: str
    calendar: Calendar


class CalendarList(Page):
    calendars: list[Calendar]


class CalendarDeleted(BaseModel):
    status: str
    deleted: bool
    calendar_id: uuid.UUID


class FreeSlot(BaseModel):
    start: datetime
    end: datetime
    start_local: str


class FreeSlots(BaseModel):
    status: str
    calendar_id: uuid.UUID
    timezone: str
    slots: Annotated[
        list[FreeSlot],
        Field(max_length=MAX_SLOTS, description=f"At most {MAX_SLOTS:,} slots, earliest first."),
    ]
    truncated: bool = Field(
        description=f"True when the days asked for hold more than {MAX_SLOTS:,} free slots "
        "(ask again from a later day for the rest); false otherwise."
    )


def _free_slots_query(schema: dict[str, Any]) -> None:
    day = {"type": "string", "format": "date", "pattern": DATE_PATTERN, "required": True}
    schema["properties"] = {
        "from": {**day, "description": "The first day (YYYY-MM-DD, in the calendar's timezone)."},
        "to": {
            **day,
            "description": f"The last day (YYYY-MM-DD, in the calendar's timezone); "
            f"not before from, at most {MAX_RANGE_DAYS} days in all.",
        },
    }


class FreeSlotsQuery(BaseModel):
    """The days of GET /calendars/{id}/free-slots (documented here, parsed by the route)."""

    model_config = ConfigDict(json_schema_extra=_free_slots_query)

    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
