"""Request and response models of the tag operations."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.types import NON_BLANK_PATTERN, document

TAG = {"type": "string", "pattern": NON_BLANK_PATTERN}


class TagsRequest(BaseModel):
    """`tag` and/or `tags`, combined."""

    # At least one non-empty tag, each at most 100 characters once trimmed.
    model_config = ConfigDict(extra="ignore", json_schema_extra=document(
        properties={"tag": {"maxLength": 100}, "tags": {"items": {"maxLength": 100}}},
        any_of=[{"required": ["tag"], "properties": {"tag": TAG}},
                {"required": ["tags"],
                 "properties": {"tags": {"type": "array", "contains": TAG}}}]))

    tag: StrictStr | None = Field(default=None, max_length=1000)
    tags: list[StrictStr] | None = Field(default=None, max_length=100)


class TagsAdded(BaseModel):
    status: str
    contact_id: uuid.UUID
    tags: list[str]
    added: list[str]


class TagsRemoved(BaseModel):
    status: str
    contact_id: uuid.UUID
    tags: list[str]
    removed: list[str]


class TagSummaryItem(BaseModel):
    tag: str
    count: int


class TagSummary(BaseModel):
    status: str
    tag_count: int
    tags: list[TagSummaryItem]
