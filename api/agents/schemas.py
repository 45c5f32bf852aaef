"""Request and response models of the agent operations (and the error shape voice routes share)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from api.types import UUID_KEYWORDS, NonBlank, Number, document, when

MODELS: dict[str, tuple[str, ...]] = {
    "openai": ("gpt-5.1", "gpt-5", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o",
               "gpt-4o-mini"),
    "anthropic": ("claude-opus-4.5", "claude-opus-4", "claude-sonnet-4", "claude-3.5-sonnet",
                  "claude-3.5-haiku", "claude-3-opus", "claude-3-haiku"),
    "google": ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash",
               "gemini-1.5-pro", "gemini-1.5-flash"),
    "deepseek": ("deepseek-chat", "deepseek-reasoner", "deepseek-coder"),
    "grok": ("grok-3", "grok-3-mini", "grok-2", "grok-2-vision"),
}
PROVIDER_OF_MODEL = {model: provider for provider, models in MODELS.items() for model in models}

Label = Annotated[StrictStr, Field(min_length=1, max_length=100)]


def _needs(field: str) -> dict[str, object]:
    return {"required": [field], "properties": {field: {"type": "string"}}}


HTTP_URL = {"format": "uri", "pattern": r"^[hH][tT][tT][pP][sS]?://",
            "description": "An absolute http(s) URL whose host resolves to public addresses."}


class CreateAgentRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=document(
        properties={"llm_model": {"enum": list(PROVIDER_OF_MODEL)},
                    "voicemail_type": {"enum": ["leave_message", "hangup", None]},
                    "organization_id": UUID_KEYWORDS, "sub_account_id": UUID_KEYWORDS,
                    "webhook_url": HTTP_URL},
        all_of=[when("background_noise", [True], _needs("background_type")),
                when("voicemail_detection", [True], _needs("voicemail_type")),
                when("voicemail_type", ["leave_message"], _needs("voicemail_message")),
                when("webhook", [True], _needs("webhook_url"))]))

    name: Annotated[NonBlank, Field(max_length=200)]
    voice_id: Annotated[NonBlank, Field(max_length=100)]
    max_duration: Annotated[Number, Field(gt=0, le=1440, allow_inf_nan=False)]
    temperature: Annotated[Number, Field(ge=0, le=1, allow_inf_nan=False)]
    # Seconds and milliseconds: the bounds CONTRACT 9 gives.
    silence_timeout: Annotated[Number, Field(ge=1, le=600, allow_inf_nan=False)]
    voice_activity_timeout: Annotated[Number, Field(ge=100, le=10_000, allow_inf_nan=False)]
    llm_model: StrictStr
    language: Annotated[StrictStr, Field(pattern=r"^[a-z]{2}-[A-Z]{2}$")]
    background_noise: StrictBool
    background_type: Annotated[NonBlank, Field(max_length=100)] | None = None
    voicemail_detection: StrictBool
    voicemail_type: StrictStr | None = None
    voicemail_message: Annotated[NonBlank, Field(max_length=5000)] | None = None
    backcchanneling: StrictBool
    is_active: StrictBool = True
    organization_id: StrictStr
    sub_account_id: StrictStr
    webhook: StrictBool
    webhook_url: Annotated[StrictStr, Field(max_length=2048)] | None = None
    recording: StrictBool


class AgentCreated(BaseModel):
    success: bool
    id: uuid.UUID
    name: str
    is_active: bool
    created_at: datetime


class Agent(BaseModel):
    id: uuid.UUID
    organization_id: uuid.UUID
    sub_account_id: uuid.UUID
    name: str
    voice_id: str
    max_duration: float
    temperature: float
    silence_timeout: float
    voice_activity_timeout: float
    llm_model: str
    language: str
    background_noise: bool
    background_type: str | None
    voicemail_detection: bool
    voicemail_type: str | None
    voicemail_message: str | None
    backcchanneling: bool
    is_active: bool
    webhook: bool
    webhook_url: str | None
    webhook_secret: str
    recording: bool
    created_at: datetime
    updated_at: datetime


class AgentResponse(BaseModel):
    status: str
    agent: Agent


class AgentList(BaseModel):
    status: str
    agents: list[Agent]
    total: int
    limit: int
    offset: int
    has_more: bool
