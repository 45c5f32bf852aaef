"""Request and response models of the tag operations."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.types import WHITESPACE, document

# CONTRACT 11a: the zero-width characters a tag loses when it is normalised.
ZERO_WIDTH_CHARACTERS = "\u200b\u200c\u200d\u2060\ufeff"
# A tag that is not empty once normalised holds a character that is neither whitespace nor
# zero-width (NFKC turns nothing else into those).
TAG_PATTERN = (
    "[^"
    + "".join(f"\\u{ord(character):04x}" for character in (*WHITESPACE, *ZERO_WIDTH_CHARACTERS))
    + "]"
)
TAG = {"type": "string", "pattern": TAG_PATTERN}


class TagsRequest(BaseModel):
    """`tag` and/or `tags`, combined."""

    # At least one non-empty tag, each at most 100 characters once trimmed.
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            properties={"tag": {"maxLength": 100}, "tags": {"items": {"maxLength": 100}}},
            any_of=[
                {"required": ["tag"], "properties": {"tag": TAG}},
                {"required": ["tags"], "properties": {"tags": {"type": "array", "contains": TAG}}},
            ],
        ),
    )

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
