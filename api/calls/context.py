"""A call's context (CONTRACT 10 "Context"): the value of every placeholder name its agent's
prompt and first_message may use, and those two texts rendered, for the voice runtime.

The names: `contact.first_name`, `contact.last_name`, `contact.name`, `contact.email`,
`contact.phone`, `contact.custom.<key>` (each stored custom field value as text), `call.direction`,
`call.from_number`, `call.to_number`, `sub_account.name`, `now` (ISO 8601 to the second with
the agent's UTC offset), `today` (YYYY-MM-DD in the agent's timezone), and every key of the
call's `variables`. A variable named like one of the others (`now`, `today`) does not replace it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import asyncpg

from api.agents.context import FIRST_MESSAGE_LIMIT, PROMPT_LIMIT, render
from api.calls.queries import SELECT_CALL_CONTEXT
from tenancy.clock import utcnow
from tenancy.db import fetch_one_or_404


def custom_field_text(value: Any) -> str:
    """A stored custom field value as text: text, select and date values as they are,
    numbers and booleans in their JSON form, a multi-select's options joined by ", "."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(custom_field_text(item) for item in value)
    return json.dumps(value)


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # stored names are checked; never a failed call
        return ZoneInfo("UTC")


def context_values(row: Mapping[str, Any], now: datetime) -> dict[str, str]:
    """The names and values of SELECT_CALL_CONTEXT's row at the instant `now`."""
    local = now.astimezone(_zone(row["timezone"]))
    values = {str(key): str(value) for key, value in (row["variables"] or {}).items()}
    values |= {
        f"contact.custom.{key}": custom_field_text(value)
        for key, value in (row["custom_field_values"] or {}).items()
    }
    values |= {
        "contact.first_name": row["first_name"] or "",
        "contact.last_name": row["last_name"] or "",
        "contact.name": row["name"] or "",
        "contact.email": row["email"] or "",
        "contact.phone": row["phone"] or "",
        "call.direction": row["direction"],
        "call.from_number": row["from_number"],
        "call.to_number": row["to_number"],
        "sub_account.name": row["sub_account_name"] or "",
        "now": local.isoformat(timespec="seconds"),
        "today": local.date().isoformat(),
    }
    return values


async def call_context(
    conn: asyncpg.Connection, call_id: uuid.UUID, *, now: datetime | None = None
) -> dict[str, str]:
    """Every placeholder name of the call and its value (`now` defaults to this instant); 404
    for a call the tenant does not have. `conn` is in the call's tenant transaction."""
    row = await fetch_one_or_404(conn, SELECT_CALL_CONTEXT, call_id, what="call")
    return context_values(row, now or utcnow())


async def rendered_instructions(
    conn: asyncpg.Connection, call_id: uuid.UUID, *, now: datetime | None = None
) -> tuple[str, str | None]:
    """The call's agent's prompt (the system instructions of its model requests) and
    first_message, with the call's context filled in and cut at PROMPT_LIMIT and
    FIRST_MESSAGE_LIMIT characters (CONTRACT 18a). A first_message that renders blank is None:
    as with none, the agent waits for its model's reply."""
    row = await fetch_one_or_404(conn, SELECT_CALL_CONTEXT, call_id, what="call")
    values = context_values(row, now or utcnow())
    first_message = row["first_message"]
    rendered_first = (
        render(first_message, values, FIRST_MESSAGE_LIMIT) if first_message is not None else None
    )
    if rendered_first is not None and not rendered_first.strip():
        rendered_first = None
    return render(row["prompt"], values, PROMPT_LIMIT), rendered_first
