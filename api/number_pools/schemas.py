"""Request and response models of the number pool operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from api.schemas import Page
from api.types import UUID_KEYWORDS, NonBlank, UUIDText, document


class CreatePoolRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(properties={"phone_number_ids": {"items": UUID_KEYWORDS}}),
    )

    name: Annotated[NonBlank, Field(max_length=100)]
    phone_number_ids: Annotated[list[UUIDText], Field(min_length=1, max_length=100)]


class Pool(BaseModel):
    id: uuid.UUID
    name: str
    phone_number_ids: list[uuid.UUID]
    created_at: datetime


class PoolResponse(BaseModel):
    status: str
    pool: Pool


class PoolList(Page):
    number_pools: list[Pool]
