"""Request and response models of the smart-list operations."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.tags.schemas import TAG_PATTERN
from api.types import NonBlank, document


class CreateSmartListRequest(BaseModel):
    # At least one non-empty tag.
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            required=("tags",),
            properties={
                "tags": {
                    "contains": {"type": "string", "pattern": TAG_PATTERN},
                    "items": {"maxLength": 100},
                }
            },
        ),
    )

    name: NonBlank = Field(max_length=200)
    tags: list[StrictStr] | None = Field(default=None, max_length=100)


class SmartList(BaseModel):
    id: uuid.UUID
    name: str
    tags: list[str]
    contact_count: int
    created_at: datetime
    updated_at: datetime


class SmartListResponse(BaseModel):
    status: str
    smart_list: SmartList


class SmartListPage(BaseModel):
    status: str
    smart_lists: list[SmartList]
    total: int
    limit: int
    offset: int
    has_more: bool
