"""Field types and small parsers shared by every feature's request models."""

from __future__ import annotations

import uuid
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from email_validator import EmailNotValidError, validate_email
from pydantic import AfterValidator, BeforeValidator, PlainSerializer

from api.errors import APIError


def _no_str_or_bool(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("must be a JSON number")
    return value


def _to_money(value: Any) -> Decimal:
    _no_str_or_bool(value)
    try:
        amount = Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError("must be a number") from exc
    if not amount.is_finite():
        raise ValueError("must be a finite number")
    return amount


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


# A JSON number (never a string or boolean), exact as sent.
Money = Annotated[Decimal, BeforeValidator(_to_money),
                  PlainSerializer(float, return_type=float, when_used="json")]
Number = Annotated[float, BeforeValidator(_no_str_or_bool)]
NonBlank = Annotated[str, AfterValidator(_non_blank)]


def parse_uuid(value: Any, field: str = "id") -> uuid.UUID:
    """An id from a path or body; anything but a UUID string is 400 invalid_uuid."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str) and len(value) == 36:
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise APIError(400, "invalid_uuid", f"{field} must be a UUID")


def normalise_email(value: str) -> str | None:
    """A syntactically valid address, lowercased; None when it is not one."""
    try:
        result = validate_email(value.strip(), check_deliverability=False)
    except EmailNotValidError:
        return None
    return result.normalized.lower()


def money_places(amount: Decimal, places: int = 2) -> bool:
    return -amount.as_tuple().exponent <= places if isinstance(amount.as_tuple().exponent,
                                                               int) else False


def pagination(args: Any, *, default: int = 50, maximum: int = 100) -> tuple[int, int]:
    """The general list rule: limit 1..maximum (default 50), offset >= 0; otherwise 400."""
    limit = _int_arg(args.get("limit"), "limit", default)
    offset = _int_arg(args.get("offset"), "offset", 0)
    if not 1 <= limit <= maximum:
        raise APIError(400, "validation_error", f"limit must be between 1 and {maximum}",
                       details=[{"field": "limit", "message": f"must be 1 to {maximum}",
                                 "type": "range"}])
    if offset < 0:
        raise APIError(400, "validation_error", "offset must be 0 or more",
                       details=[{"field": "offset", "message": "must be 0 or more",
                                 "type": "range"}])
    return limit, offset


def _int_arg(raw: str | None, name: str, default: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise APIError(400, "validation_error", f"{name} must be an integer",
                       details=[{"field": name, "message": "must be an integer",
                                 "type": "int_parsing"}]) from None
