"""Request and response models of the company operations."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from api.types import NonBlank


class CreateCompanyRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: NonBlank = Field(max_length=200)


class Company(BaseModel):
    id: uuid.UUID
    name: str
    created_at: datetime
    updated_at: datetime


class CompanyResponse(BaseModel):
    status: str
    company: Company


class CompanyList(BaseModel):
    status: str
    companies: list[Company]
    total: int
    limit: int
    offset: int
    has_more: bool
