"""Request and response models of the campaign operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from api import timezones
from api.calls.schemas import VARIABLES_SCHEMA, Variables
from api.campaigns.business_hours import DAYS, HHMM
from api.campaigns.content import check_links
from api.schemas import Page
from api.types import UUID_KEYWORDS, HeaderText, NonBlank, UUIDText, document, when

MAX_CONTACT_IDS = 10_000
CampaignStatus = Literal[
    "draft", "scheduled", "sending", "completed", "paused", "cancelled", "failed"
]
MAX_EMAIL_CONTENT = 500_000
MAX_SMS_CONTENT = 1600
# CONTRACT 10: what a call campaign's retry policy may name, and what it names by default.
RetryOutcome = Literal["no_answer", "busy", "voicemail", "failed"]
DEFAULT_RETRY_ON: list[RetryOutcome] = ["no_answer", "busy"]
# The fields only a call campaign has, and those only email and SMS campaigns have.
CALL_FIELDS = (
    "agent_id",
    "pool_id",
    "variables",
    "calling_window",
    "max_concurrent_calls",
    "retry",
)
MESSAGE_FIELDS = ("subject", "message_content", "business_hours_config")


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


HOURS = {
    "type": "object",
    "required": ["timezone", "days", "start", "end"],
    "additionalProperties": False,
    "description": "Sends happen on these days between start and end (start before end).",
    "properties": {
        "timezone": {"enum": sorted(timezones.names())},
        "days": {"type": "array", "minItems": 1, "items": {"enum": list(DAYS)}},
        "start": {"type": "string", "pattern": HHMM.pattern},
        "end": {"type": "string", "pattern": HHMM.pattern},
    },
}
FUTURE = {"format": "date-time", "description": "An RFC 3339 date-time in the future."}
WINDOW = {
    **HOURS,
    "description": "Calls start only on these days between start and end, local time of "
    "timezone (start before end); a call already started may run past the end.",
}
ABSENT: dict[str, Any] = {"type": "null"}


class RetryPolicy(BaseModel):
    """When a recipient's call is tried again (CONTRACT 10)."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: StrictInt = Field(default=1, ge=1, le=5)
    delay_minutes: StrictInt = Field(default=60, ge=1, le=1440)
    on: list[RetryOutcome] = Field(default_factory=lambda: list(DEFAULT_RETRY_ON), max_length=4)


class CreateCampaignRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(
            properties={
                "contact_ids": {"items": UUID_KEYWORDS},
                "smart_list_id": UUID_KEYWORDS,
                "business_hours_config": {"anyOf": [HOURS, {"type": "null"}]},
                "agent_id": UUID_KEYWORDS,
                "pool_id": UUID_KEYWORDS,
                "variables": {"anyOf": [VARIABLES_SCHEMA, {"type": "null"}]},
                "calling_window": {"anyOf": [WINDOW, {"type": "null"}]},
            },
            all_of=[
                when(
                    "business_hours_enabled",
                    [True],
                    {
                        "required": ["business_hours_config"],
                        "properties": {"business_hours_config": {"type": "object"}},
                    },
                ),
                when(
                    "campaign_type",
                    ["sms"],
                    {"properties": {"message_content": {"maxLength": MAX_SMS_CONTENT}}},
                ),
                when(
                    "campaign_type",
                    ["call"],
                    {
                        "required": ["agent_id"],
                        "properties": {
                            "agent_id": {"type": "string"},
                            "business_hours_enabled": {"enum": [False]},
                            **{field: ABSENT for field in MESSAGE_FIELDS},
                        },
                    },
                ),
                when(
                    "campaign_type",
                    ["email", "sms"],
                    {"properties": {field: ABSENT for field in CALL_FIELDS}},
                ),
            ],
        )
    )

    name: NonBlank = Field(max_length=200)
    campaign_type: Literal["email", "sms", "call"]
    subject: HeaderText | None = Field(default=None, max_length=998)
    message_content: Annotated[StrictStr, AfterValidator(check_links)] | None = Field(
        default=None, max_length=MAX_EMAIL_CONTENT
    )
    contact_ids: list[UUIDText] | None = Field(default=None, max_length=MAX_CONTACT_IDS)
    smart_list_id: UUIDText | None = None
    business_hours_enabled: StrictBool = False
    business_hours_config: dict[str, Any] | None = None
    # Call campaigns (CONTRACT 10).
    agent_id: UUIDText | None = None
    pool_id: UUIDText | None = None
    variables: Variables | None = None
    calling_window: dict[str, Any] | None = None
    max_concurrent_calls: StrictInt | None = Field(default=None, ge=1, le=100)
    retry: RetryPolicy | None = None


class ScheduleRequest(Strict):
    model_config = ConfigDict(json_schema_extra=document(properties={"start_date": FUTURE}))

    start_date: StrictStr = Field(max_length=64)


class ResumeRequest(Strict):
    model_config = ConfigDict(json_schema_extra=document(properties={"start_date": FUTURE}))

    start_date: StrictStr | None = Field(default=None, max_length=64)


class BusinessHoursConfig(BaseModel):
    timezone: str
    days: list[str]
    start: str
    end: str


class Retry(BaseModel):
    max_attempts: int
    delay_minutes: int
    on: list[str]


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
    agent_id: uuid.UUID | None
    pool_id: uuid.UUID | None
    variables: dict[str, str] | None
    calling_window: BusinessHoursConfig | None
    max_concurrent_calls: int | None
    retry: Retry | None
    created_at: datetime
    updated_at: datetime


class CampaignResponse(BaseModel):
    status: str
    campaign: Campaign


class CampaignFilters(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=document(not_null=("status",)))

    status: CampaignStatus | None = None


class CampaignList(Page):
    campaigns: list[Campaign]


class Recipient(BaseModel):
    contact_id: uuid.UUID
    status: Literal["pending", "in_progress", "done", "skipped", "failed"]
    attempts: int
    call_ids: list[uuid.UUID]
    message_id: uuid.UUID | None
    outcome: str | None
    error: str | None


class RecipientList(Page):
    recipients: list[Recipient]
