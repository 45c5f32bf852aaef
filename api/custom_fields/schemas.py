"""Request and response models of the custom-field operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from api.types import NON_BLANK_PATTERN, NonBlank, document, when

FieldType = Literal["text", "number", "boolean", "date", "select", "multi_select"]


# Options (distinct, non-blank) belong to select fields, which need at least one.
CHOICES = {
    "required": ["options"],
    "properties": {
        "options": {
            "type": "array",
            "minItems": 1,
            "uniqueItems": True,
            "items": {"type": "string", "pattern": NON_BLANK_PATTERN},
        }
    },
}
NO_CHOICES = {"properties": {"options": {"anyOf": [{"type": "null"}, {"maxItems": 0}]}}}


class CreateCustomFieldRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            all_of=[
                when("field_type", ["select", "multi_select"], CHOICES),
                when("field_type", ["text", "number", "boolean", "date"], NO_CHOICES),
            ]
        ),
    )

    key: StrictStr = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    name: NonBlank = Field(max_length=200)
    field_type: FieldType
    options: list[StrictStr] | None = Field(default=None, max_length=200)
    read_only: StrictBool = False


class CustomField(BaseModel):
    id: uuid.UUID
    key: str
    name: str
    field_type: str
    options: list[str] | None
    read_only: bool
    is_active: bool
    created_at: datetime


class CustomFieldResponse(BaseModel):
    status: str
    custom_field: CustomField


class CustomFieldList(BaseModel):
    status: str
    custom_fields: list[CustomField]
    total: int
    limit: int
    offset: int
    has_more: bool
