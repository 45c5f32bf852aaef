"""Request and response models of the webhook subscription operations."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.events import ALL_EVENTS, EVENT_TYPES
from api.types import document
from integrations.webhooks import USERINFO_PATTERN


class CreateSubscriptionRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            properties={
                "url": {
                    "format": "uri",
                    "pattern": r"^\s*[hH][tT][tT][pP][sS]?://",
                    "not": {"pattern": USERINFO_PATTERN},
                    "description": (
                        "An absolute http(s) URL whose host resolves to public addresses, "
                        "without a user name or password."
                    ),
                },
                "events": {
                    "items": {"enum": [*EVENT_TYPES, ALL_EVENTS]},
                    "description": f"Event types, or `{ALL_EVENTS}` for every event (future ones "
                    "included).",
                },
            }
        ),
    )

    url: StrictStr = Field(min_length=1, max_length=2048)
    events: list[StrictStr] = Field(min_length=1, max_length=20)


class Subscription(BaseModel):
    id: uuid.UUID
    url: str
    events: list[str]
    secret: str | None = None
    is_active: bool
    disabled_reason: str | None = None
    created_at: datetime


class SubscriptionCreated(BaseModel):
    status: str
    subscription: Subscription


class SubscriptionList(BaseModel):
    status: str
    subscriptions: list[Subscription]
    total: int
    limit: int
    offset: int
    has_more: bool


class SubscriptionDeleted(BaseModel):
    status: str
    deleted: bool
    subscription_id: uuid.UUID
