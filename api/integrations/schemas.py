"""Request and response models of the LLM and speech vendor integrations."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictStr

API_KEY_PATTERN = r"^[ ]*[!-~]+[ ]*$"


class ConnectRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # Sent to the vendor in an HTTP header, so visible ASCII only (spaces around it are trimmed).
    # The pattern is the whole rule, and the document's (it implies a character that is not
    # blank: api.types.NonBlank's own pattern would take its place there).
    api_key: Annotated[StrictStr, Field(min_length=1, max_length=1000, pattern=API_KEY_PATTERN)]


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
