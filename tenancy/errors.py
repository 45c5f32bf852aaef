"""The one error type of the service: a status, a stable snake_case code and a message.

It lives below `api` so that services (and jobs) can refuse with it; `api.errors` renders it.
"""

from __future__ import annotations

from typing import Any


class APIError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.extra = extra or {}
        self.headers = headers or {}


def not_found(what: str) -> APIError:
    return APIError(404, "not_found", f"{what} not found")


def invalid(field: str, message: str, kind: str = "value_error") -> dict[str, str]:
    """One entry of a validation error's `details`: what is wrong with `field`."""
    return {"field": field, "message": message, "type": kind}


def refuse(details: list[dict[str, str]]) -> APIError:
    """400 validation_error naming every field of `details` (made with `invalid`)."""
    return APIError(400, "validation_error", "invalid request", details=details)
