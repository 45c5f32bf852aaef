"""Custom fields: their definitions, and checking a contact's values against them."""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from typing import Any

import asyncpg

from tenancy.errors import APIError, invalid, refuse

CHOICE_TYPES = ("select", "multi_select")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
MAX_TEXT = 10_000

CUSTOM_FIELD_COLUMNS = "id, key, name, field_type, options, read_only, is_active, created_at"

INSERT_CUSTOM_FIELD = f"""
INSERT INTO custom_fields (key, name, field_type, options, read_only)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (sub_account_id, key) DO NOTHING
RETURNING {CUSTOM_FIELD_COLUMNS}
"""

SELECT_CUSTOM_FIELDS = f"""
SELECT {CUSTOM_FIELD_COLUMNS} FROM custom_fields
ORDER BY created_at DESC, id DESC
LIMIT $1 OFFSET $2
"""

COUNT_CUSTOM_FIELDS = "SELECT count(*) FROM custom_fields"

SELECT_FIELDS_BY_KEY = """
SELECT key, field_type, options, read_only, is_active FROM custom_fields WHERE key = ANY($1::text[])
"""


def custom_field_out(row: asyncpg.Record) -> dict[str, Any]:
    return dict(row)


async def create_custom_field(
    conn: asyncpg.Connection,
    key: str,
    name: str,
    field_type: str,
    options: list[str] | None,
    read_only: bool,
) -> dict[str, Any]:
    options = _checked_options(field_type, options)
    row = await conn.fetchrow(
        INSERT_CUSTOM_FIELD, key, name.strip(), field_type, options, read_only
    )
    if row is None:
        raise APIError(409, "custom_field_key_taken", f"a custom field with key {key!r} exists")
    return custom_field_out(row)


def _checked_options(field_type: str, options: list[str] | None) -> list[str] | None:
    if field_type not in CHOICE_TYPES:
        if options:
            raise refuse(
                [invalid("options", f"options apply only to {' and '.join(CHOICE_TYPES)} fields")]
            )
        return None
    cleaned = [option.strip() for option in options or []]
    if not cleaned or any(not option for option in cleaned):
        raise refuse([invalid("options", "a select field needs non-empty options")])
    if len(set(cleaned)) != len(cleaned):
        raise refuse([invalid("options", "options must be distinct")])
    return cleaned


async def list_custom_fields(
    conn: asyncpg.Connection, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    rows = await conn.fetch(SELECT_CUSTOM_FIELDS, limit, offset)
    total = await conn.fetchval(COUNT_CUSTOM_FIELDS)
    return [custom_field_out(row) for row in rows], total


async def checked_values(
    conn: asyncpg.Connection, values: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Values to set and keys to clear (null), once every key and value is valid; else 400."""
    rows = await conn.fetch(SELECT_FIELDS_BY_KEY, list(values))
    fields = {row["key"]: row for row in rows}
    details: list[dict[str, str]] = []
    to_set: dict[str, Any] = {}
    to_clear: list[str] = []
    for key, value in values.items():
        where = f"custom_field_values.{key}"
        field = fields.get(key)
        if field is None or not field["is_active"]:
            details.append(invalid(where, "no active custom field has this key", "unknown_key"))
        elif field["read_only"]:
            details.append(
                invalid(where, "this field is read-only (mirrored from the CRM)", "read_only")
            )
        elif value is None:
            to_clear.append(key)
        else:
            try:
                to_set[key] = _checked_value(field["field_type"], field["options"] or [], value)
            except ValueError as exc:
                details.append(invalid(where, str(exc), field["field_type"]))
    if details:
        raise refuse(details)
    return to_set, to_clear


def _checked_value(field_type: str, options: list[str], value: Any) -> Any:
    """The value as stored, or ValueError saying what a value of this type must be."""
    if field_type == "text":
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise ValueError(f"must be a string of at most {MAX_TEXT} characters")
        return value
    if field_type == "number":
        return _number(value)
    if field_type == "boolean":
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value
    if field_type == "date":
        return _date(value)
    if field_type == "select":
        if not isinstance(value, str) or value not in options:
            raise ValueError("must be one of the options: " + ", ".join(options))
        return value
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("must be an array of strings")
    if any(item not in options for item in value):
        raise ValueError("every item must be one of the options: " + ", ".join(options))
    return list(dict.fromkeys(value))


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("must be a JSON number")
    if isinstance(value, int):
        return value
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


def _date(value: Any) -> str:
    if not isinstance(value, str) or not DATE.fullmatch(value):
        raise ValueError("must be a date as YYYY-MM-DD")
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError("must be a real calendar date (YYYY-MM-DD)") from None
    return value
