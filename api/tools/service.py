"""Tools (CONTRACT 10): the rules of a tool's name, type, parameters and config; create, read,
change and delete; and an agent's tools as the voice runtime offers and calls them.

An http tool's header values are kept apart from its config, as one Fernet token of their JSON
object (`header_values`); the config holds each name with "***". The tool's signing secret is a
Fernet token too. Both are decrypted only for the answer (the secret) and for the runtime.

Agents name their tools in an array (`agents.tool_ids`), which no foreign key can guard: an
agent's create or change locks the tools it names FOR KEY SHARE, a tool's deletion locks the
tool FOR UPDATE and then looks for agents naming it, so either the deletion sees the agent (409
tool_in_use) or the agent waits for the deletion and finds no tool (404).

Names are unique in the sub-account ignoring case (CONTRACT 18a): the unique index holds exact
names only, so a create or rename locks the name in lower case (a transaction advisory lock) and
then looks for it in any case.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from pydantic import BaseModel, ValidationError

from api.contacts.service import valid_phone
from api.tools.schemas import (
    CONFIG_MODELS,
    FIXED_PARAMETERS,
    MASKED,
    TOOL_TYPES,
    CalendarConfig,
    CreateToolRequest,
    HttpConfig,
    TransferCallConfig,
    UpdateToolRequest,
)
from integrations.webhooks import TargetNotAllowed, check_target, new_secret, parse_target
from tenancy import secrets
from tenancy.db import fetch_one_or_404, fetch_page
from tenancy.errors import APIError, invalid, refuse
from tenancy.scope import TenantScope

# Locked until the tool is written: a calendar's deletion (FOR UPDATE) either goes first (the
# tool finds no calendar: 404) or waits and then sees the tool (409 calendar_in_use).
SELECT_CALENDAR = "SELECT id FROM calendars WHERE id = $1 FOR KEY SHARE"
COLUMNS = "id, name, type, description, parameters, config, secret, created_at, updated_at"

# ON CONFLICT: of concurrent creates of one name the unique index lets one in.
INSERT_TOOL = f"""
INSERT INTO tools (name, type, description, parameters, config, header_values, secret)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (sub_account_id, name) DO NOTHING
RETURNING {COLUMNS}
"""

SELECT_TOOL = f"SELECT {COLUMNS} FROM tools WHERE id = $1"

# Names are unique ignoring case (CONTRACT 18a), which the unique index (exact names) does not
# see: a create or rename takes this lock on the name in lower case, then looks for the name.
LOCK_TOOL_NAME = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

NAME_TAKEN = """
SELECT EXISTS (SELECT 1 FROM tools WHERE lower(name) = lower($1) AND id IS DISTINCT FROM $2)
"""

SELECT_TOOLS = f"""
SELECT {COLUMNS}, count(*) OVER () AS total
FROM tools
ORDER BY created_at DESC, id DESC
LIMIT $1 OFFSET $2
"""

COUNT_TOOLS = "SELECT count(*) FROM tools"

# NO KEY UPDATE: a change waits for a deletion, not for an agent that names the tool.
LOCK_TOOL_FOR_CHANGE = f"SELECT {COLUMNS}, header_values FROM tools WHERE id = $1 FOR NO KEY UPDATE"

UPDATE_TOOL = f"""
UPDATE tools
SET name = $2, description = $3, config = $4, header_values = $5, updated_at = now()
WHERE id = $1
RETURNING {COLUMNS}
"""

LOCK_TOOL_FOR_DELETE = "SELECT id FROM tools WHERE id = $1 FOR UPDATE"

TOOL_IN_USE = """
SELECT EXISTS (SELECT 1 FROM agents WHERE deleted_at IS NULL AND $1 = ANY (tool_ids))
"""

DELETE_TOOL = "DELETE FROM tools WHERE id = $1"

# An agent's tools in the order of its tool_ids.
SELECT_AGENT_TOOLS = f"""
SELECT {", ".join(f"t.{column.strip()}" for column in COLUMNS.split(","))}, t.header_values
FROM agents AS a
CROSS JOIN LATERAL unnest(a.tool_ids) WITH ORDINALITY AS u(tool_id, position)
JOIN tools AS t ON t.id = u.tool_id
WHERE a.id = $1
ORDER BY u.position
"""


def _details(exc: ValidationError, root: str) -> list[dict[str, str]]:
    return [
        invalid(
            ".".join([root, *(str(part) for part in error["loc"])]), error["msg"], error["type"]
        )
        for error in exc.errors(include_input=False, include_url=False)
    ]


# --- the rules ----------------------------------------------------------------------------------


def check_type(kind: str) -> None:
    """One of the types a tool may have."""
    if kind not in TOOL_TYPES:
        raise refuse([invalid("type", f"must be one of {', '.join(TOOL_TYPES)}", "enum")])


@dataclass(frozen=True)
class Config:
    """A checked config: as kept and shown (header values as "***"), and the header values."""

    shown: dict[str, Any]
    header_values: dict[str, str] = field(default_factory=dict)


def check_config(
    kind: str, raw: dict[str, Any], stored_headers: dict[str, str] | None = None
) -> Config:
    """The config of a tool of type `kind`, or 400 naming each bad field. `stored_headers`:
    the header values of the tool being changed, which a header sent as "***" keeps; a new
    tool has none (None), so "***" is refused there."""
    model: type[BaseModel] = CONFIG_MODELS[kind]
    try:
        config = model.model_validate(raw)
    except ValidationError as exc:
        raise refuse(_details(exc, "config")) from None
    if isinstance(config, HttpConfig):
        return _http_config(config, stored_headers)
    if isinstance(config, TransferCallConfig):
        phone = valid_phone(config.phone_number)
        if phone is None:
            raise refuse([invalid("config.phone_number", "not a valid phone number")])
        return Config({"phone_number": phone, "message": config.message})
    if isinstance(config, CalendarConfig):
        return Config({"calendar_id": str(config.calendar_id)})
    return Config({})


async def check_calendar(conn: asyncpg.Connection, config: dict[str, Any]) -> None:
    """A calendar tool's calendar is one of the sub-account's (404 calendar not found)."""
    if "calendar_id" in config:
        await fetch_one_or_404(
            conn, SELECT_CALENDAR, uuid.UUID(config["calendar_id"]), what="calendar"
        )


def _http_config(config: HttpConfig, stored_headers: dict[str, str] | None) -> Config:
    problems = []
    try:
        parse_target(config.url)
    except TargetNotAllowed as exc:
        problems.append(invalid("config.url", str(exc), "url"))
    stored = {name.lower(): value for name, value in (stored_headers or {}).items()}
    values = {}
    for name, value in config.headers.items():
        if value != MASKED:
            values[name] = value
        elif name.lower() in stored:
            values[name] = stored[name.lower()]
        else:
            problems.append(
                invalid(
                    f"config.headers.{name}",
                    f"{MASKED} keeps a stored value, and this tool has none for this header",
                )
            )
    if problems:
        raise refuse(problems)
    shown = {
        "url": config.url,
        "headers": dict.fromkeys(values, MASKED),
        "timeout_seconds": config.timeout_seconds,
    }
    return Config(shown, values)


async def check_url(raw: dict[str, Any], *, allow_private_webhooks: bool) -> None:
    """A config's url (when it has a well-formed one; check_config judges the rest) has a host
    that resolves to addresses we may call, as for webhook URLs. Run before any transaction:
    the lookup may take a while."""
    url = raw.get("url")
    if not isinstance(url, str):
        return
    try:
        parse_target(url)
    except TargetNotAllowed:
        return
    try:
        await check_target(url, allow_private=allow_private_webhooks)
    except TargetNotAllowed as exc:
        raise APIError(400, "webhook_url_not_allowed", f"config.url: {exc}") from None


def _parameters(data: CreateToolRequest) -> dict[str, Any]:
    fixed = FIXED_PARAMETERS.get(data.type)
    if fixed is None:
        return data.parameters.stored()
    if "parameters" in data.model_fields_set:
        raise refuse(
            [
                invalid(
                    "parameters", f"{data.type} tools take fixed parameters; leave it out", "fixed"
                )
            ]
        )
    return fixed


def _sealed(header_values: dict[str, str]) -> str | None:
    return secrets.encrypt(json.dumps(header_values)) if header_values else None


def _opened(token: str | None) -> dict[str, str]:
    return json.loads(secrets.decrypt(token)) if token else {}


def _name_taken(name: str) -> APIError:
    return APIError(
        409, "tool_name_taken", f"the sub-account already has a tool named {name} (in any case)"
    )


async def _check_name_free(
    conn: asyncpg.Connection, scope: TenantScope, name: str, tool_id: uuid.UUID | None = None
) -> None:
    """No other tool of the sub-account has `name` in any case (409 tool_name_taken); the
    name stays locked until the transaction ends."""
    await conn.execute(LOCK_TOOL_NAME, f"tool name:{scope.sub_account_id}:{name.lower()}")
    if await conn.fetchval(NAME_TAKEN, name, tool_id):
        raise _name_taken(name)


def tool_out(row: asyncpg.Record | dict[str, Any]) -> dict[str, Any]:
    """The tool as the API shows it: its signing secret readable, header values masked."""
    out = {key: row[key] for key in COLUMNS.replace(" ", "").split(",")}
    out["secret"] = secrets.decrypt(row["secret"])
    return out


# --- the operations -----------------------------------------------------------------------------


async def create_tool(
    scope: TenantScope, data: CreateToolRequest, *, allow_private_webhooks: bool
) -> dict[str, Any]:
    check_type(data.type)
    parameters = _parameters(data)
    config = check_config(data.type, data.config)
    await check_url(config.shown, allow_private_webhooks=allow_private_webhooks)
    secret = new_secret()
    async with scope.transaction() as conn:
        await check_calendar(conn, config.shown)
        await _check_name_free(conn, scope, data.name)
        row = await conn.fetchrow(
            INSERT_TOOL,
            data.name,
            data.type,
            data.description,
            parameters,
            config.shown,
            _sealed(config.header_values),
            secrets.encrypt(secret),
        )
    if row is None:
        raise _name_taken(data.name)
    return {**tool_out(row), "secret": secret}


async def get_tool(scope: TenantScope, tool_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_TOOL, tool_id, what="tool")
    return tool_out(row)


async def list_tools(
    scope: TenantScope, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    async with scope.transaction() as conn:
        items, total = await fetch_page(conn, SELECT_TOOLS, COUNT_TOOLS, limit, offset)
    return [tool_out(item) for item in items], total


def _changes(data: UpdateToolRequest) -> dict[str, Any]:
    """The fields the body sent, once none is null and it tries no change PATCH cannot make."""
    fixed = [
        invalid(name, f"a tool's {name} never changes; create another tool", "read_only")
        for name in ("type", "parameters")
        if name in (data.model_extra or {})
    ]
    if fixed:
        raise refuse(fixed)
    sent = data.model_dump(include=data.model_fields_set & {"name", "description", "config"})
    nulls = [
        invalid(name, "must not be null", "null") for name, value in sent.items() if value is None
    ]
    if nulls:
        raise refuse(nulls)
    if not sent:
        raise APIError(400, "nothing_to_update", "send name, description or config")
    return sent


async def update_tool(
    scope: TenantScope, tool_id: uuid.UUID, data: UpdateToolRequest, *, allow_private_webhooks: bool
) -> dict[str, Any]:
    """Change name, description or config; a config sent replaces the stored one whole."""
    changes = _changes(data)
    if "config" in changes:
        await check_url(changes["config"], allow_private_webhooks=allow_private_webhooks)
    async with scope.transaction() as conn:
        current = await fetch_one_or_404(conn, LOCK_TOOL_FOR_CHANGE, tool_id, what="tool")
        header_values = current["header_values"]
        config = current["config"]
        if "config" in changes:
            checked = check_config(
                current["type"], changes["config"], _opened(current["header_values"])
            )
            config, header_values = checked.shown, _sealed(checked.header_values)
            await check_calendar(conn, config)
        name = changes.get("name", current["name"])
        if name != current["name"]:
            await _check_name_free(conn, scope, name, tool_id)
        try:
            row = await conn.fetchrow(
                UPDATE_TOOL,
                tool_id,
                name,
                changes.get("description", current["description"]),
                config,
                header_values,
            )
        except asyncpg.UniqueViolationError:
            raise _name_taken(name) from None
    return tool_out(row)


async def delete_tool(scope: TenantScope, tool_id: uuid.UUID) -> None:
    """Delete a tool no agent names (409 tool_in_use otherwise)."""
    async with scope.transaction() as conn:
        await fetch_one_or_404(conn, LOCK_TOOL_FOR_DELETE, tool_id, what="tool")
        if await conn.fetchval(TOOL_IN_USE, tool_id):
            raise APIError(
                409,
                "tool_in_use",
                "an agent uses this tool; remove it from the agent's tool_ids first",
            )
        await conn.execute(DELETE_TOOL, tool_id)


# --- the voice runtime's side -------------------------------------------------------------------


async def agent_tools(conn: asyncpg.Connection, agent_id: uuid.UUID) -> list[dict[str, Any]]:
    """The agent's tools in the order of its tool_ids, as the runtime offers and calls them:
    `{id, name, type, description, parameters, config, secret, created_at, updated_at}` with
    the signing secret and an http tool's header values (config.headers) in plain text.
    `conn` is in the agent's tenant transaction; an agent without tools (or none) gives []."""
    tools = []
    for row in await conn.fetch(SELECT_AGENT_TOOLS, agent_id):
        tool = tool_out(row)
        if tool["type"] == "http":
            tool["config"] = {**tool["config"], "headers": _opened(row["header_values"])}
        tools.append(tool)
    return tools
