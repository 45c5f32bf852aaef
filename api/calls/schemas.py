"""Request and response models of the AI call operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, StringConstraints

from api.conversations.schemas import ScheduledTime
from api.schemas import Page
from api.types import UUID_KEYWORDS, Money, UUIDQuery, UUIDText, document

# CONTRACT 10: a call's variables fill the placeholders of its agent's prompt.
MAX_VARIABLES = 50
MAX_VARIABLE_LENGTH = 1_000
VARIABLE_NAME = r"^[a-z][a-z0-9_]{0,39}$"
VariableName = Annotated[str, StringConstraints(pattern=VARIABLE_NAME)]
VariableValue = Annotated[StrictStr, Field(max_length=MAX_VARIABLE_LENGTH)]
Variables = Annotated[dict[VariableName, VariableValue], Field(max_length=MAX_VARIABLES)]
VARIABLES_SCHEMA = {
    "type": "object",
    "maxProperties": MAX_VARIABLES,
    "propertyNames": {"pattern": VARIABLE_NAME},
    "additionalProperties": {"type": "string", "maxLength": MAX_VARIABLE_LENGTH},
}


class PlaceCallRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            properties={
                "agent_id": UUID_KEYWORDS,
                "pool_id": UUID_KEYWORDS,
                "variables": {
                    "anyOf": [VARIABLES_SCHEMA, {"type": "null"}],
                    "description": "Values of the `{{ name }}` placeholders of "
                    "the agent's prompt and first_message.",
                },
            }
        ),
    )

    agent_id: UUIDText
    pool_id: UUIDText | None = None
    variables: Variables | None = None
    # CONTRACT 10: placed then (status `scheduled` until), rather than now.
    start_at: ScheduledTime | None = None


class CallPlaced(BaseModel):
    status: str
    call_id: uuid.UUID
    message: str


class CallMessage(BaseModel):
    role: Literal["agent", "contact"]
    text: str
    start_seconds: float


class Call(BaseModel):
    id: uuid.UUID
    contact_id: uuid.UUID
    agent_id: uuid.UUID
    direction: Literal["outbound", "inbound"]
    from_number: str
    to_number: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    duration_seconds: int | None
    ended_reason: (
        Literal[
            "customer_hangup",
            "agent_hangup",
            "silence_timeout",
            "max_duration",
            "voicemail",
            "no_answer",
            "busy",
            "failed",
            "transferred",
        ]
        | None
    )
    answered_by: Literal["human", "machine", "unknown"] | None
    transcript: str | None
    messages: list[CallMessage]
    recording_url: str | None
    cost: Money
    error: str | None
    # CONTRACT 10: what the call was placed with, the tools its model called, the number a
    # transfer connected the contact to, and the post-call analysis (null while the call runs).
    variables: dict[str, str]
    tool_calls: list[dict[str, Any]]
    transferred_to: str | None
    analysis: dict[str, Any] | None
    # When a scheduled call is (or was) placed; null for a call placed at once.
    start_at: datetime | None


class CallResponse(BaseModel):
    status: str
    call: Call


class CallFilters(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(not_null=("contact_id", "agent_id", "status", "direction")),
    )

    contact_id: UUIDQuery | None = None
    agent_id: UUIDQuery | None = None
    status: (
        Literal["scheduled", "queued", "ringing", "in_progress", "completed", "failed", "cancelled"]
        | None
    ) = None
    direction: Literal["outbound", "inbound"] | None = None


class CallList(Page):
    calls: list[Call]


class SandboxInboundCall(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    from_number: StrictStr = Field(alias="from", max_length=64)
    to: StrictStr = Field(max_length=64)
    # The carrier's id of the call: a repeated webhook with the same one rings once (CONTRACT 11).
    call_sid: (
        Annotated[StrictStr, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None
    ) = None


class InboundCallRinging(BaseModel):
    status: str
    call_id: uuid.UUID
    contact_id: uuid.UUID
