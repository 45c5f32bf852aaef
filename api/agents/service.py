"""Agent rules: the conditional fields, the vendors that must be connected, the reads, the
change and the deletion of an agent.

A deleted agent keeps its row (its calls keep their agent_id) with `deleted_at` set, and every
read here and in the features that take an agent (assigning a number, placing a call) leaves it
out. The deletion locks the agent row FOR UPDATE; a call being placed and a number being
assigned read the agent FOR KEY SHARE, so either the deletion sees their call or number (409
agent_in_use), or they wait for it and find no agent (404).

An agent's tools (`tool_ids`, CONTRACT 10) are read FOR KEY SHARE when it is created or its
tool_ids change, against a tool's deletion (api/tools/service.py); its analysis maps data to
active custom fields of the sub-account.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import asyncpg

from api.agents.schemas import (
    BACKGROUND_TYPES,
    EDITABLE,
    NOT_NULL,
    PROVIDER_OF_MODEL,
    VOICEMAIL_TYPES,
    AgentAnalysis,
    CreateAgentRequest,
    UpdateAgentRequest,
)
from api.agents.voices import default_transcriber, missing_speech_vendors, speech_vendor_of
from api.types import parse_uuid
from integrations.webhooks import TargetNotAllowed, check_target, new_secret, parse_target
from tenancy import secrets
from tenancy.db import fetch_one_or_404, fetch_page
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

AGENT_COLUMNS = """
id, name, voice_id, max_duration, temperature, silence_timeout, voice_activity_timeout,
llm_model, language, background_noise, background_type, voicemail_detection, voicemail_type,
voicemail_message, backcchanneling, is_active, webhook, webhook_url, webhook_secret, recording,
prompt, first_message, transcriber, timezone, tool_ids, analysis, created_at, updated_at
"""

INSERT_AGENT = f"""
INSERT INTO agents
    (name, voice_id, max_duration, temperature, silence_timeout, voice_activity_timeout,
     llm_model, language, background_noise, background_type, voicemail_detection,
     voicemail_type, voicemail_message, backcchanneling, is_active, webhook, webhook_url,
     webhook_secret, recording, prompt, first_message, transcriber, timezone, tool_ids, analysis)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
        $20, $21, $22, $23, $24, $25)
RETURNING {AGENT_COLUMNS}
"""

SELECT_AGENT = f"SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1 AND deleted_at IS NULL"

# NO KEY UPDATE: a change waits for a deletion (FOR UPDATE) but not for a call being placed.
LOCK_AGENT_FOR_CHANGE = f"""
SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1 AND deleted_at IS NULL
FOR NO KEY UPDATE
"""

LOCK_AGENT_FOR_DELETE = "SELECT id FROM agents WHERE id = $1 AND deleted_at IS NULL FOR UPDATE"

SELECT_AGENTS = f"""
SELECT {AGENT_COLUMNS}, count(*) OVER () AS total
FROM agents
WHERE deleted_at IS NULL
ORDER BY created_at DESC, id DESC
LIMIT $1 OFFSET $2
"""

COUNT_AGENTS = "SELECT count(*) FROM agents WHERE deleted_at IS NULL"

SELECT_CONNECTED = "SELECT provider FROM integrations"

UPDATE_AGENT = f"""
UPDATE agents
SET name = $2, voice_id = $3, max_duration = $4, temperature = $5, silence_timeout = $6,
    voice_activity_timeout = $7, llm_model = $8, language = $9, background_noise = $10,
    background_type = $11, voicemail_detection = $12, voicemail_type = $13,
    voicemail_message = $14, backcchanneling = $15, is_active = $16, webhook = $17,
    webhook_url = $18, recording = $19, prompt = $20, first_message = $21, transcriber = $22,
    timezone = $23, tool_ids = $24, analysis = $25, updated_at = now()
WHERE id = $1
RETURNING {AGENT_COLUMNS}
"""

# Numbers assigned, a call not ended (a scheduled one included), or a call campaign that can
# still place calls with it.
AGENT_IN_USE = """
SELECT EXISTS (SELECT 1 FROM phone_numbers WHERE agent_id = $1 AND is_active)
    OR EXISTS (SELECT 1 FROM calls
               WHERE agent_id = $1
                 AND status IN ('scheduled', 'queued', 'ringing', 'in_progress'))
    OR EXISTS (SELECT 1 FROM campaigns
               WHERE agent_id = $1 AND status IN ('draft', 'scheduled', 'sending', 'paused'))
"""

DELETE_AGENT = "UPDATE agents SET deleted_at = now(), updated_at = now() WHERE id = $1"

# The stored fields in the order of INSERT_AGENT ($1..$25 without webhook_secret) and
# UPDATE_AGENT ($2..$25).
FIELDS = (
    "name",
    "voice_id",
    "max_duration",
    "temperature",
    "silence_timeout",
    "voice_activity_timeout",
    "llm_model",
    "language",
    "background_noise",
    "background_type",
    "voicemail_detection",
    "voicemail_type",
    "voicemail_message",
    "backcchanneling",
    "is_active",
    "webhook",
    "webhook_url",
)
LATER_FIELDS = (
    "recording",
    "prompt",
    "first_message",
    "transcriber",
    "timezone",
    "tool_ids",
    "analysis",
)

# KEY SHARE: a tool's deletion (FOR UPDATE) either sees this agent naming it or makes us wait
# and find the tool gone (api/tools/service.py).
LOCK_TOOLS = "SELECT id FROM tools WHERE id = ANY ($1::uuid[]) FOR KEY SHARE"

SELECT_ACTIVE_CUSTOM_FIELDS = """
SELECT key FROM custom_fields WHERE key = ANY ($1::text[]) AND is_active
"""


def _problem(field: str, message: str, kind: str) -> dict[str, str]:
    return {"field": field, "message": message, "type": kind}


def _url_problem(value: str) -> str | None:
    try:
        parse_target(value)
    except TargetNotAllowed as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class RuleFields:
    """The fields the create rules judge, of an agent as it is or would be after a change."""

    llm_model: str
    voice_id: str
    background_noise: bool
    background_type: str | None
    voicemail_detection: bool
    voicemail_type: str | None
    voicemail_message: str | None
    webhook: bool
    webhook_url: str | None
    transcriber: str | None

    @classmethod
    def of(cls, agent: Mapping[str, Any]) -> RuleFields:
        """Those fields of a whole agent: a body's fields, or a stored row with changes."""
        return cls(**{item.name: agent[item.name] for item in fields(cls)})


def field_problems(agent: RuleFields) -> list[dict[str, str]]:
    """What the body's types cannot say, on the agent as it would be: the model list, the
    voice, the enums and the conditional fields."""
    problems = []
    if agent.llm_model not in PROVIDER_OF_MODEL:
        problems.append(_problem("llm_model", "unknown model id", "enum"))
    if not speech_vendor_of(agent.voice_id)[1]:
        problems.append(_problem("voice_id", "names a vendor but no voice", "value"))
    if agent.background_type is not None and agent.background_type not in BACKGROUND_TYPES:
        problems.append(_problem("background_type", "must be office, cafe or call_center", "enum"))
    elif agent.background_noise and agent.background_type is None:
        problems.append(
            _problem("background_type", "required when background_noise is true", "missing")
        )
    if agent.voicemail_type is not None and agent.voicemail_type not in VOICEMAIL_TYPES:
        problems.append(_problem("voicemail_type", "must be leave_message or hangup", "enum"))
    elif agent.voicemail_detection and agent.voicemail_type is None:
        problems.append(
            _problem("voicemail_type", "required when voicemail_detection is true", "missing")
        )
    if agent.voicemail_type == "leave_message" and agent.voicemail_message is None:
        problems.append(
            _problem(
                "voicemail_message", "required when voicemail_type is leave_message", "missing"
            )
        )
    if agent.webhook_url is not None and (problem := _url_problem(agent.webhook_url)):
        problems.append(_problem("webhook_url", problem, "url"))
    elif agent.webhook and agent.webhook_url is None:
        problems.append(_problem("webhook_url", "required when webhook is true", "missing"))
    return problems


def _refuse(problems: list[dict[str, str]]) -> None:
    if problems:
        raise APIError(400, "validation_error", "invalid request", details=problems)


async def check_webhook_target(url: str | None, *, allow_private_webhooks: bool) -> None:
    """The post-call webhook's host resolves to addresses we may call (CONTRACT 3)."""
    if url is None:
        return
    if (problem := _url_problem(url)) is not None:
        _refuse([_problem("webhook_url", problem, "url")])
    try:
        await check_target(url, allow_private=allow_private_webhooks)
    except TargetNotAllowed as exc:
        raise APIError(400, "webhook_url_not_allowed", str(exc)) from None


async def check_fields(data: CreateAgentRequest, *, allow_private_webhooks: bool) -> None:
    _refuse(field_problems(RuleFields.of(data.model_dump())))
    tool_ids(data.tool_ids)
    _refuse(analysis_problems(data.analysis))
    await check_webhook_target(data.webhook_url, allow_private_webhooks=allow_private_webhooks)


def tool_ids(values: list[str]) -> list[uuid.UUID]:
    """The ids of tool_ids (400 invalid_uuid for one that is not a UUID), each named once."""
    ids = [parse_uuid(value, "tool_ids") for value in values]
    if len(set(ids)) != len(ids):
        _refuse([_problem("tool_ids", "names a tool more than once", "unique")])
    return ids


def analysis_problems(analysis: AgentAnalysis | None) -> list[dict[str, str]]:
    """custom_field_map's keys are properties of data_schema."""
    if analysis is None or not analysis.custom_field_map:
        return []
    properties = analysis.data_schema.properties if analysis.data_schema else {}
    return [
        _problem(
            f"analysis.custom_field_map.{name}",
            "not a property of analysis.data_schema",
            "unknown_property",
        )
        for name in analysis.custom_field_map
        if name not in properties
    ]


async def _check_references(conn: asyncpg.Connection, agent: Mapping[str, Any]) -> None:
    """The agent's tools are the sub-account's (404 otherwise, each locked against deletion)
    and its analysis maps to active custom fields (400 otherwise)."""
    mapped = (agent["analysis"] or {}).get("custom_field_map") or {}
    if mapped:
        active = {
            row["key"]
            for row in await conn.fetch(SELECT_ACTIVE_CUSTOM_FIELDS, list(set(mapped.values())))
        }
        _refuse(
            [
                _problem(
                    f"analysis.custom_field_map.{name}",
                    "no active custom field has this key",
                    "unknown_key",
                )
                for name, key in mapped.items()
                if key not in active
            ]
        )
    if agent["tool_ids"]:
        found = {row["id"] for row in await conn.fetch(LOCK_TOOLS, agent["tool_ids"])}
        if set(agent["tool_ids"]) - found:
            raise not_found("tool")


def check_vendors(agent: RuleFields, connected: set[str]) -> None:
    """The agent's model, voice and transcriber vendors are connected integrations."""
    provider = PROVIDER_OF_MODEL[agent.llm_model]
    if provider not in connected:
        raise APIError(
            400,
            "llm_provider_not_connected",
            f"connect the {provider} integration before using {agent.llm_model}",
        )
    missing = missing_speech_vendors(agent.voice_id, agent.transcriber, connected)
    if missing:
        raise APIError(
            400,
            "speech_provider_not_connected",
            f"connect the {' and '.join(missing)} integration before using "
            "this voice and transcriber",
        )


async def _connected(conn: asyncpg.Connection) -> set[str]:
    return {row["provider"] for row in await conn.fetch(SELECT_CONNECTED)}


async def create_agent(scope: TenantScope, data: CreateAgentRequest) -> dict[str, Any]:
    agent = data.model_dump()
    agent["name"] = data.name.strip()
    agent["tool_ids"] = tool_ids(data.tool_ids)
    agent["analysis"] = data.analysis.stored() if data.analysis is not None else None
    webhook_secret = new_secret()
    async with scope.transaction() as conn:
        connected = await _connected(conn)
        if agent["transcriber"] is None:
            agent["transcriber"] = default_transcriber(connected)
        check_vendors(RuleFields.of(agent), connected)
        await _check_references(conn, agent)
        row = await conn.fetchrow(
            INSERT_AGENT,
            *(agent[field] for field in FIELDS),
            secrets.encrypt(webhook_secret),
            *(agent[field] for field in LATER_FIELDS),
        )
    return {**row, "webhook_secret": webhook_secret}


def _sent(data: UpdateAgentRequest) -> dict[str, Any]:
    """The fields the body sent; null only where the agent may hold null."""
    sent = data.model_dump(include=data.model_fields_set & set(EDITABLE))
    _refuse(
        [
            _problem(field, "must not be null", "null")
            for field in NOT_NULL
            if field in sent and sent[field] is None
        ]
    )
    if "tool_ids" in sent:
        sent["tool_ids"] = tool_ids(sent["tool_ids"])
    if data.analysis is not None:
        _refuse(analysis_problems(data.analysis))
        sent["analysis"] = data.analysis.stored()
    return sent


async def update_agent(
    scope: TenantScope,
    agent_id: uuid.UUID,
    data: UpdateAgentRequest,
    *,
    allow_private_webhooks: bool,
) -> dict[str, Any]:
    """Apply the fields sent; the create rules hold for the agent as it is afterwards."""
    changes = _sent(data)
    if not changes:
        raise APIError(400, "nothing_to_update", "send at least one field of the agent")
    if "name" in changes:
        changes["name"] = changes["name"].strip()
    # Resolved before the row is locked: the host lookup may take a while.
    await check_webhook_target(
        changes.get("webhook_url"), allow_private_webhooks=allow_private_webhooks
    )
    async with scope.transaction() as conn:
        current = await fetch_one_or_404(conn, LOCK_AGENT_FOR_CHANGE, agent_id, what="agent")
        agent = {**current, **changes}
        _refuse(field_problems(RuleFields.of(agent)))
        connected = await _connected(conn)
        if "transcriber" in changes and changes["transcriber"] is None:
            agent["transcriber"] = default_transcriber(connected)
        check_vendors(RuleFields.of(agent), connected)
        if "tool_ids" in changes or "analysis" in changes:
            await _check_references(
                conn, {"tool_ids": changes.get("tool_ids"), "analysis": changes.get("analysis")}
            )
        row = await conn.fetchrow(
            UPDATE_AGENT, agent_id, *(agent[field] for field in FIELDS + LATER_FIELDS)
        )
    return _shown(row)


async def delete_agent(scope: TenantScope, agent_id: uuid.UUID) -> None:
    """Mark the agent deleted, unless a number is assigned to it or a call of it is open."""
    async with scope.transaction() as conn:
        await fetch_one_or_404(conn, LOCK_AGENT_FOR_DELETE, agent_id, what="agent")
        if await conn.fetchval(AGENT_IN_USE, agent_id):
            raise APIError(
                409,
                "agent_in_use",
                "the agent has numbers assigned, calls not ended (scheduled ones included) "
                "or call campaigns not finished; unassign the numbers, wait for or cancel "
                "the calls and campaigns first",
            )
        await conn.execute(DELETE_AGENT, agent_id)


async def get_agent(scope: TenantScope, agent_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_AGENT, agent_id, what="agent")
    return _shown(row)


async def list_agents(
    scope: TenantScope, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    async with scope.transaction() as conn:
        items, total = await fetch_page(conn, SELECT_AGENTS, COUNT_AGENTS, limit, offset)
    return [_shown(item) for item in items], total


def _shown(row: asyncpg.Record | dict[str, Any]) -> dict[str, Any]:
    """The agent as the API shows it: with its webhook secret readable."""
    return {**row, "webhook_secret": secrets.decrypt(row["webhook_secret"])}
