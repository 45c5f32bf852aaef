"""Response and query models of the event log: events, deliveries and their attempts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from api.events import EVENT_TYPES


def _query_parameters(schema: dict[str, Any]) -> None:
    # Optional query parameters, not nullable ones: absent is the only "no filter".
    schema["properties"] = {
        "type": {
            "type": "string",
            "enum": list(EVENT_TYPES),
            "description": "Only events of this type (repeatable: any of them).",
        },
        "since": {
            "type": "string",
            "format": "date-time",
            "description": "Only events after this ISO 8601 timestamp (exclusive); "
            "without a zone, UTC. The feed is in commit order: a poller "
            "that passes the largest timestamp it has seen misses no "
            "event. Not with `after`.",
        },
        "after": {
            "type": "string",
            "pattern": "^msg_[0-9a-f]{32}$",
            "description": "Only events after this one in the feed's order (an event id "
            "of this sub-account, such as the newest one a poller has "
            "seen; 400 otherwise). Not with `since`. With `since` or "
            "`after` the list is every event after that point, newest "
            "first and paged as usual: walk the pages until `has_more` "
            "is false (a later page may repeat an event that came in "
            "meanwhile; none is skipped), then poll again from the "
            "newest event seen.",
        },
    }


class EventsQuery(BaseModel):
    """The filters of GET /events (documented here, parsed by the route)."""

    model_config = ConfigDict(json_schema_extra=_query_parameters)

    type: str | None = None
    since: datetime | None = None
    after: str | None = None


class Event(BaseModel):
    id: str
    type: str
    timestamp: datetime
    data: dict[str, Any]


class EventList(BaseModel):
    status: str
    events: list[Event]
    total: int
    limit: int
    offset: int
    has_more: bool


class Attempt(BaseModel):
    at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int


class Delivery(BaseModel):
    id: uuid.UUID
    event_id: str
    event_type: str
    status: Literal["pending", "delivered", "failed", "cancelled"]
    attempts: list[Attempt]
    next_attempt_at: datetime | None


class DeliveryList(BaseModel):
    status: str
    deliveries: list[Delivery]
    total: int
    limit: int
    offset: int
    has_more: bool


class Redelivered(BaseModel):
    status: str
    delivery: Delivery
