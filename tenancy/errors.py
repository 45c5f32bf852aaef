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


# Pydantic's error types for text that is no UUID: an id in a body that is none is 400
# invalid_uuid (CONTRACT 2), whatever else the body has wrong. An id of another JSON type (a
# number) stays validation_error, as any field of the wrong type does.
UUID_ERRORS = frozenset({"uuid_parsing", "uuid_version"})


def refuse(details: list[dict[str, str]]) -> APIError:
    """400 validation_error naming every field of `details` (made with `invalid`), or
    invalid_uuid when one of them is an id that is no UUID."""
    ids = [detail["field"] for detail in details if detail["type"] in UUID_ERRORS]
    if ids:
        return APIError(400, "invalid_uuid", f"{ids[0]} must be a UUID", details=details)
    return APIError(400, "validation_error", "invalid request", details=details)
