"""Request and response models of the agent operations (and the error shape voice routes share)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    StringConstraints,
)

from api.agents.voices import VOICE_VENDORS
from api.timezones import Timezone  # CONTRACT 10, 18a: IANA names only
from api.tools.schemas import PROPERTY_NAME, JSONSchemaObject, PropertyName
from api.types import (
    UUID_KEYWORDS,
    Documented,
    NonBlank,
    Number,
    UUIDText,
    document,
    required_one_of,
    when,
)
from integrations.webhooks import USERINFO_PATTERN

MODELS: dict[str, tuple[str, ...]] = {
    "openai": (
        "gpt-5.1",
        "gpt-5",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4.1-nano",
        "gpt-4o",
        "gpt-4o-mini",
    ),
    "anthropic": (
        "claude-opus-4.5",
        "claude-opus-4",
        "claude-sonnet-4",
        "claude-3.5-sonnet",
        "claude-3.5-haiku",
        "claude-3-opus",
        "claude-3-haiku",
    ),
    "google": (
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
        "gemini-2.0-flash",
        "gemini-1.5-pro",
        "gemini-1.5-flash",
    ),
    "deepseek": ("deepseek-chat", "deepseek-reasoner", "deepseek-coder"),
    "grok": ("grok-3", "grok-3-mini", "grok-2", "grok-2-vision"),
}
PROVIDER_OF_MODEL = {model: provider for provider, models in MODELS.items() for model in models}

Label = Annotated[StrictStr, Field(min_length=1, max_length=100)]

VOICEMAIL_TYPES = ("leave_message", "hangup")
BACKGROUND_TYPES = ("office", "cafe", "call_center")
# CONTRACT 9's bounds of the agent's texts.
MAX_PROMPT = 20_000
MAX_FIRST_MESSAGE = 1_000

Name = Annotated[NonBlank, Field(max_length=200)]
VoiceId = Annotated[NonBlank, Field(max_length=100)]
# Minutes: CONTRACT 11 bounds it to 0.1 (6 s) .. 240.
MaxDuration = Annotated[Number, Field(ge=0.1, le=240, allow_inf_nan=False)]
Temperature = Annotated[Number, Field(ge=0, le=1, allow_inf_nan=False)]
# Seconds and milliseconds: the bounds CONTRACT 9 gives.
SilenceTimeout = Annotated[Number, Field(ge=1, le=600, allow_inf_nan=False)]
VoiceActivityTimeout = Annotated[Number, Field(ge=100, le=10_000, allow_inf_nan=False)]
Language = Annotated[StrictStr, Field(pattern=r"^[a-z]{2}-[A-Z]{2}$")]
BackgroundType = Annotated[NonBlank, Field(max_length=100)]
VoicemailMessage = Annotated[NonBlank, Field(max_length=5000)]
WebhookUrl = Annotated[StrictStr, Field(max_length=2048)]
Prompt = Annotated[StrictStr, Field(max_length=MAX_PROMPT)]
FirstMessage = Annotated[NonBlank, Field(max_length=MAX_FIRST_MESSAGE)]
Transcriber = Literal["openai", "deepgram"]

MAX_TOOLS = 20
MAX_SUCCESS_CRITERIA = 2_000
CUSTOM_FIELD_KEY = r"^[a-z][a-z0-9_]{0,63}$"


# Tools of the sub-account (a non-UUID is 400 invalid_uuid, another's or an unknown one 404).
ToolIds = Annotated[list[UUIDText], Field(max_length=MAX_TOOLS), Documented(uniqueItems=True)]
CustomFieldKey = Annotated[str, StringConstraints(pattern=CUSTOM_FIELD_KEY)]


class AgentAnalysis(BaseModel):
    """What the worker asks the agent's model after a call: a summary, whether the call met
    success_criteria, and data shaped by data_schema; custom_field_map writes data properties
    to the contact's custom fields (each key a data_schema property, each value an active
    custom field key)."""

    model_config = ConfigDict(extra="forbid")

    summary: StrictBool = True
    success_criteria: Annotated[NonBlank, Field(max_length=MAX_SUCCESS_CRITERIA)] | None = None
    data_schema: JSONSchemaObject | None = None
    custom_field_map: (
        Annotated[
            dict[PropertyName, CustomFieldKey],
            Field(max_length=MAX_TOOLS),
            Documented(propertyNames={"pattern": PROPERTY_NAME}),
        ]
        | None
    ) = None

    def stored(self) -> dict[str, Any]:
        """As kept and shown: every key, null where not given."""
        return {
            "summary": self.summary,
            "success_criteria": self.success_criteria,
            "data_schema": self.data_schema.stored() if self.data_schema else None,
            "custom_field_map": self.custom_field_map,
        }


def _needs(field: str) -> dict[str, object]:
    return {"required": [field], "properties": {field: {"type": "string"}}}


HTTP_URL = {
    "format": "uri",
    "pattern": r"^[hH][tT][tT][pP][sS]?://",
    "not": {"pattern": USERINFO_PATTERN},
    "description": "An absolute http(s) URL whose host resolves to public addresses, without a "
    "user name or password.",
}


# A known vendor prefix needs a voice after it ("elevenlabs/" names none).
VOICE_ID: dict[str, Any] = {
    "not": {"pattern": "^(?:" + "|".join(VOICE_VENDORS) + ")/$"},
    "description": "provider/voice: openai/alloy, elevenlabs/<voice id>, "
    "deepgram/aura-2-thalia-en, cartesia/<voice id>; without a known "
    "prefix, an OpenAI voice. Its vendor must be connected.",
}
FIELD_KEYWORDS: dict[str, dict[str, Any]] = {
    "llm_model": {"enum": list(PROVIDER_OF_MODEL)},
    "voice_id": VOICE_ID,
    "background_type": {"enum": [*BACKGROUND_TYPES, None]},
    "voicemail_type": {"enum": [*VOICEMAIL_TYPES, None]},
    "webhook_url": HTTP_URL,
    "transcriber": {
        "description": "openai or deepgram, connected; null or absent: the first "
        "of them connected (null if neither is)."
    },
}


class CreateAgentRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            properties={
                **FIELD_KEYWORDS,
                "organization_id": UUID_KEYWORDS,
                "sub_account_id": UUID_KEYWORDS,
            },
            all_of=[
                when("background_noise", [True], _needs("background_type")),
                when("voicemail_detection", [True], _needs("voicemail_type")),
                when("voicemail_type", ["leave_message"], _needs("voicemail_message")),
                when("webhook", [True], _needs("webhook_url")),
            ],
        ),
    )

    name: Name
    voice_id: VoiceId
    max_duration: MaxDuration
    temperature: Temperature
    silence_timeout: SilenceTimeout
    voice_activity_timeout: VoiceActivityTimeout
    llm_model: StrictStr
    language: Language
    background_noise: StrictBool
    background_type: BackgroundType | None = None
    voicemail_detection: StrictBool
    voicemail_type: StrictStr | None = None
    voicemail_message: VoicemailMessage | None = None
    backcchanneling: StrictBool
    is_active: StrictBool = True
    organization_id: UUIDText
    sub_account_id: UUIDText
    webhook: StrictBool
    webhook_url: WebhookUrl | None = None
    recording: StrictBool
    prompt: Prompt = ""
    first_message: FirstMessage | None = None
    transcriber: Transcriber | None = None
    timezone: Timezone = "UTC"
    tool_ids: ToolIds = Field(default_factory=list)
    analysis: AgentAnalysis | None = None


# Fields PATCH may send as null (clearing them; a null transcriber is the default one).
NULLABLE = (
    "background_type",
    "voicemail_type",
    "voicemail_message",
    "webhook_url",
    "first_message",
    "transcriber",
    "analysis",
)
NOT_NULL = (
    "name",
    "voice_id",
    "max_duration",
    "temperature",
    "silence_timeout",
    "voice_activity_timeout",
    "llm_model",
    "language",
    "background_noise",
    "voicemail_detection",
    "backcchanneling",
    "is_active",
    "webhook",
    "recording",
    "prompt",
    "timezone",
    "tool_ids",
)
EDITABLE = NOT_NULL + NULLABLE


class UpdateAgentRequest(BaseModel):
    """Any create-agent field but organization_id and sub_account_id; the create rules apply
    to the agent as it is after the change (so a field the stored agent already has need not
    be sent again)."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            not_null=NOT_NULL, properties=FIELD_KEYWORDS, any_of=required_one_of(*EDITABLE)
        ),
    )

    name: Name | None = None
    voice_id: VoiceId | None = None
    max_duration: MaxDuration | None = None
    temperature: Temperature | None = None
    silence_timeout: SilenceTimeout | None = None
    voice_activity_timeout: VoiceActivityTimeout | None = None
    llm_model: StrictStr | None = None
    language: Language | None = None
    background_noise: StrictBool | None = None
    background_type: BackgroundType | None = None
    voicemail_detection: StrictBool | None = None
    voicemail_type: StrictStr | None = None
    voicemail_message: VoicemailMessage | None = None
    backcchanneling: StrictBool | None = None
    is_active: StrictBool | None = None
    webhook: StrictBool | None = None
    webhook_url: WebhookUrl | None = None
    recording: StrictBool | None = None
    prompt: Prompt | None = None
    first_message: FirstMessage | None = None
    transcriber: Transcriber | None = None
    timezone: Timezone | None = None
    tool_ids: ToolIds | None = None
    analysis: AgentAnalysis | None = None


class AnalysisShown(BaseModel):
    summary: bool
    success_criteria: str | None
    data_schema: dict[str, Any] | None
    custom_field_map: dict[str, str] | None


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
    prompt: str
    first_message: str | None
    transcriber: str | None
    timezone: str
    tool_ids: list[uuid.UUID]
    analysis: AnalysisShown | None
    created_at: datetime
    updated_at: datetime


class AgentResponse(BaseModel):
    status: str
    agent: Agent


class AgentDeleted(BaseModel):
    status: str
    deleted: bool
    agent_id: uuid.UUID


class AgentList(BaseModel):
    status: str
    agents: list[Agent]
    total: int
    limit: int
    offset: int
    has_more: bool
