"""Request and response models of the webhook subscription operations."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr


class CreateSubscriptionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

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
