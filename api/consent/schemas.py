"""Request and response models of a contact's consent per channel."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

Channel = Literal["sms", "email", "call"]
Source = Literal["api", "inbound_keyword", "unsubscribe_link", "campaign_unsubscribe_header"]


class PutConsentRequest(BaseModel):
    """`source` defaults to `api`."""

    model_config = ConfigDict(extra="ignore")

    channel: Channel
    status: Literal["granted", "revoked"]
    source: Source | None = None


class ChannelConsent(BaseModel):
    status: Literal["granted", "revoked", "unknown"]
    source: Source | None
    updated_at: datetime | None


class Consent(BaseModel):
    sms: ChannelConsent
    email: ChannelConsent
    call: ChannelConsent


class ConsentResponse(BaseModel):
    status: str
    contact_id: uuid.UUID
    consent: Consent
