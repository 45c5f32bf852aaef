"""Request and response models of the LLM and speech vendor integrations."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from api.types import NonBlank


class ConnectRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # Sent to the vendor in an HTTP header, so visible ASCII only (spaces around it are trimmed).
    api_key: Annotated[NonBlank, Field(max_length=1000, pattern=r"^[ ]*[!-~]+[ ]*$")]


class Connected(BaseModel):
    status: str
    provider: str
    connected: bool


class Integration(BaseModel):
    provider: str
    connected: bool
    updated_at: datetime | None


class IntegrationList(BaseModel):
    status: str
    integrations: list[Integration]
