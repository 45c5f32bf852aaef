"""Request and response models of messages and conversations."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    field_validator,
)

from api.types import Documented, HeaderText, NonBlank, document, when
from tenancy.clock import utcnow

MAX_CONTENT = 100_000
# CONTRACT 10: scheduled work is at most 365 days ahead.
MAX_AHEAD = timedelta(days=365)


def _scheduled_time(value: Any) -> datetime:
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError("must be an ISO 8601 datetime string")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError("must be an ISO 8601 datetime") from None
    if moment.utcoffset() is None:
        raise ValueError("must include a timezone (for example Z or +02:00)")
    now = utcnow()
    if moment <= now:
        raise ValueError("must be in the future")
    if moment - now > MAX_AHEAD:
        raise ValueError("must be at most 365 days ahead")
    return moment


# When scheduled work (a call's start_at, a message's send_at) is due: a future ISO 8601
# datetime with a timezone, at most 365 days ahead.
ScheduledTime = Annotated[
    datetime,
    BeforeValidator(_scheduled_time),
    Documented(description="A future ISO 8601 datetime with a timezone, at most 365 days ahead."),
]


class SendMessageRequest(BaseModel):
    # An sms is at most 1600 characters.
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            all_of=[when("message_type", ["sms"], {"properties": {"content": {"maxLength": 1600}}})]
        ),
    )

    message_type: Literal["sms", "email"]
    content: NonBlank = Field(max_length=MAX_CONTENT)
    subject: HeaderText | None = Field(default=None, max_length=998)
    # Sent then (delivery_status `scheduled` until), rather than now.
    send_at: ScheduledTime | None = None


class SentMessage(BaseModel):
    id: uuid.UUID
    conversation_id: uuid.UUID
    contact_id: uuid.UUID
    content: str
    subject: str | None
    sender_type: str
    message_type: str
    status: str
    direction: Literal["inbound", "outbound"]
    delivery_status: Literal[
        "queued",
        "sent",
        "delivered",
        "undelivered",
        "failed",
        "received",
        "scheduled",
        "cancelled",
    ]
    provider_message_id: str | None
    timestamp: datetime
    # CONTRACT 10: when a scheduled message is (or was) sent; why a message failed.
    send_at: datetime | None
    error: str | None


class SentMessageResponse(BaseModel):
    status: str
    message: SentMessage


class Message(BaseModel):
    id: uuid.UUID
    content: str
    sender_type: str
    message_type: str
    timestamp: datetime


class ContactSummary(BaseModel):
    name: str | None
    email: str | None
    phone: str | None


class ContactMessages(BaseModel):
    success: bool
    contact_id: uuid.UUID
    contact: ContactSummary
    conversation_id: uuid.UUID
    messages: list[Message]
    total: int
    limit: int
    offset: int


class InboundSms(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    from_number: StrictStr = Field(alias="from", max_length=64)
    to: StrictStr | None = Field(default=None, max_length=64)
    body: StrictStr = Field(max_length=MAX_CONTENT)
    message_id: StrictStr = Field(min_length=1, max_length=200)


class InboundSmsReceived(BaseModel):
    status: str
    message_id: uuid.UUID
    conversation_id: uuid.UUID
    contact_id: uuid.UUID
    duplicate: bool


class Conversation(BaseModel):
    id: uuid.UUID
    contact_id: uuid.UUID
    last_message_at: datetime | None
    last_message_preview: str | None
    unread_count: int


class ConversationList(BaseModel):
    status: str
    conversations: list[Conversation]
    total: int
    limit: int
    offset: int
    has_more: bool


class ConversationMessages(BaseModel):
    status: str
    messages: list[SentMessage]
    total: int
    limit: int
    offset: int
    has_more: bool


class UpdateConversationRequest(BaseModel):
    # Only marking read is offered: unread false marks every inbound message read.
    model_config = ConfigDict(extra="forbid")

    unread: StrictBool = Field(json_schema_extra={"const": False})

    @field_validator("unread")
    @classmethod
    def only_false(cls, value: bool) -> bool:
        if value:
            raise ValueError("only false is accepted: it marks every inbound message read")
        return value


class ConversationUpdated(BaseModel):
    status: str
    conversation: Conversation
