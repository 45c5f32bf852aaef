"""JSON as Switchboard writes it: HTTP bodies, webhook event bodies and json/jsonb columns.

UUIDs are strings, timestamps ISO 8601 UTC with milliseconds and Z (`tenancy.clock.iso`), dates
ISO 8601, anything else pydantic knows as pydantic writes it. Decimal is the one value written
two ways, and the caller says which (`whole_decimal_as_int`):

- bodies (HTTP answers, event payloads): `float(value)`, so money always reads as a decimal
  number (`Decimal("10.00")` is `10.0`);
- json/jsonb columns: a whole Decimal is an `int`. Request bodies parse every JSON float as a
  Decimal (exact money), so a whole number a client wrote as `5.0`, or a quantity, is stored as
  the integer `api.types` makes of free-form numbers and reads back as a Python `int`.

Encoded with orjson; what it refuses (text with a lone surrogate, an integer past 64 bits) goes
to the standard library, which escapes or writes it.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import orjson
from pydantic_core import to_jsonable_python

from tenancy.clock import iso

OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


def default(value: Any, *, whole_decimal_as_int: bool = False) -> Any:
    """`value` (a type JSON has no word for) in JSON types."""
    if isinstance(value, dt.datetime):
        return iso(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        if whole_decimal_as_int and value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return to_jsonable_python(value)


def _column_default(value: Any) -> Any:
    return default(value, whole_decimal_as_int=True)


def encode(value: Any, *, whole_decimal_as_int: bool = False) -> bytes:
    """`value` as compact UTF-8 JSON."""
    fallback = _column_default if whole_decimal_as_int else default
    try:
        return orjson.dumps(value, default=fallback, option=OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, default=fallback, separators=(",", ":")).encode()


def dumps(value: Any, *, whole_decimal_as_int: bool = False) -> str:
    """`value` as compact JSON text."""
    return encode(value, whole_decimal_as_int=whole_decimal_as_int).decode()
