"""Request and response models of the appointment operations (CONTRACT 10)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.schemas import Page
from api.types import UUID_KEYWORDS, UUIDQuery, UUIDText, document, required_one_of

INSTANT = {
    "format": "date-time",
    "description": "An ISO 8601 date-time with its offset (Z or +02:00): the start of a "
    "free slot (GET /calendars/{id}/free-slots gives them).",
}
EDITABLE = ("start", "title", "notes", "status")
MAX_TITLE = 200
MAX_NOTES = 5000


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class BookAppointmentRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(
            properties={"calendar_id": UUID_KEYWORDS, "contact_id": UUID_KEYWORDS, "start": INSTANT}
        )
    )

    calendar_id: UUIDText
    contact_id: UUIDText
    start: StrictStr = Field(max_length=64)
    title: StrictStr | None = Field(default=None, max_length=MAX_TITLE)
    notes: StrictStr | None = Field(default=None, max_length=MAX_NOTES)


class UpdateAppointmentRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(
            not_null=("start", "status"),
            properties={"start": INSTANT},
            any_of=required_one_of(*EDITABLE),
            refuse={"required": ["start", "status"]},
        )
    )

    start: StrictStr | None = Field(default=None, max_length=64)
    title: StrictStr | None = Field(default=None, max_length=MAX_TITLE)
    notes: StrictStr | None = Field(default=None, max_length=MAX_NOTES)
    status: Literal["cancelled"] | None = None


class Appointment(BaseModel):
    id: uuid.UUID
    calendar_id: uuid.UUID
    contact_id: uuid.UUID
    start: datetime
    end: datetime
    status: str
    title: str | None
    notes: str | None
    source: str
    call_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime


class AppointmentResponse(BaseModel):
    status: str
    appointment: Appointment


class AppointmentList(Page):
    appointments: list[Appointment]


_NOT_NULL = document(not_null=("calendar_id", "contact_id", "status"))


def _filters(schema: dict[str, Any]) -> None:
    _NOT_NULL(schema)
    instant = {"type": "string", "format": "date-time"}
    schema["properties"]["from"] = {
        **instant,
        "description": "Only appointments starting at or after this ISO 8601 instant "
        "(without an offset, UTC).",
    }
    schema["properties"]["to"] = {
        **instant,
        "description": "Only appointments starting before this ISO 8601 instant "
        "(without an offset, UTC); not before from.",
    }


class AppointmentFilters(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=_filters)

    calendar_id: UUIDQuery | None = None
    contact_id: UUIDQuery | None = None
    status: Literal["booked", "cancelled"] | None = None
    from_: StrictStr | None = Field(default=None, alias="from")
    to: StrictStr | None = None
