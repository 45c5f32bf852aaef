"""Request and response models of the campaign operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr

from api.campaigns.content import check_links
from api.types import HeaderText, NonBlank

MAX_CONTACT_IDS = 10_000
MAX_EMAIL_CONTENT = 500_000
MAX_SMS_CONTENT = 1600


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CreateCampaignRequest(Strict):
    name: NonBlank = Field(max_length=200)
    campaign_type: Literal["email", "sms"]
    subject: HeaderText | None = Field(default=None, max_length=998)
    message_content: Annotated[StrictStr, AfterValidator(check_links)] | None = Field(
        default=None, max_length=MAX_EMAIL_CONTENT)
    contact_ids: list[StrictStr] | None = Field(default=None, max_length=MAX_CONTACT_IDS)
    smart_list_id: StrictStr | None = None
    business_hours_enabled: StrictBool = False
    business_hours_config: dict[str, Any] | None = None


class ScheduleRequest(Strict):
    start_date: StrictStr = Field(max_length=64)


class ResumeRequest(Strict):
    start_date: StrictStr | None = Field(default=None, max_length=64)


class BusinessHoursConfig(BaseModel):
    timezone: str
    days: list[str]
    start: str
    end: str


class Campaign(BaseModel):
    id: uuid.UUID
    name: str
    campaign_type: str
    status: str
    subject: str | None
    message_content: str | None
    contact_ids: list[uuid.UUID]
    smart_list_id: uuid.UUID | None
    start_date: datetime | None
    business_hours_enabled: bool
    business_hours_config: BusinessHoursConfig | None
    progress: float
    contacted: int
    success: int
    pending: int
    opened_count: int
    clicked_count: int
    unsubscribed_count: int
    paused_reason: str | None
    created_at: datetime
    updated_at: datetime


class CampaignResponse(BaseModel):
    status: str
    campaign: Campaign
