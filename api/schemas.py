"""Response models every feature shares: the error envelope of each base address."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class InboundError(BaseModel):
    """The envelope under /webhooks/inbound."""

    status: str
    error: ErrorDetail


class FunctionsError(BaseModel):
    """The envelope under /functions/v1."""

    success: bool
    error: ErrorDetail


class Page(BaseModel):
    """The general list envelope (CONTRACT 2); each list adds its items under its own key."""

    status: str
    total: int
    limit: int
    offset: int
    has_more: bool
