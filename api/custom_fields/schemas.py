"""Request and response models of the custom-field operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from api.types import NonBlank

FieldType = Literal["text", "number", "boolean", "date", "select", "multi_select"]


class CreateCustomFieldRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

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
