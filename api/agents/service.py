"""Agent rules: the conditional fields of create-agent, the model's provider, the reads."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from api.agents.schemas import PROVIDER_OF_MODEL, CreateAgentRequest
from integrations.webhooks import TargetNotAllowed, check_target, new_secret, parse_target
from tenancy import secrets
from tenancy.db import fetch_one_or_404, fetch_page
from tenancy.errors import APIError
from tenancy.scope import TenantScope

VOICEMAIL_TYPES = ("leave_message", "hangup")

AGENT_COLUMNS = """
id, name, voice_id, max_duration, temperature, silence_timeout, voice_activity_timeout,
llm_model, language, background_noise, background_type, voicemail_detection, voicemail_type,
voicemail_message, backcchanneling, is_active, webhook, webhook_url, webhook_secret, recording,
created_at, updated_at
"""

INSERT_AGENT = f"""
INSERT INTO agents
    (name, voice_id, max_duration, temperature, silence_timeout, voice_activity_timeout,
     llm_model, language, background_noise, background_type, voicemail_detection,
     voicemail_type, voicemail_message, backcchanneling, is_active, webhook, webhook_url,
     webhook_secret, recording)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
RETURNING {AGENT_COLUMNS}
"""

SELECT_AGENT = f"SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1"

SELECT_AGENTS = f"""
SELECT {AGENT_COLUMNS}, count(*) OVER () AS total
FROM agents
ORDER BY created_at DESC, id DESC
LIMIT $1 OFFSET $2
"""

COUNT_AGENTS = "SELECT count(*) FROM agents"

PROVIDER_CONNECTED = "SELECT EXISTS (SELECT 1 FROM integrations WHERE provider = $1)"


def _problem(field: str, message: str, kind: str) -> dict[str, str]:
    return {"field": field, "message": message, "type": kind}


def _url_problem(value: str) -> str | None:
    try:
        parse_target(value)
    except TargetNotAllowed as exc:
        return str(exc)
    return None


def field_problems(data: CreateAgentRequest) -> list[dict[str, str]]:
    """What the body's types cannot say: the model list and the conditional fields."""
    problems = []
    if data.llm_model not in PROVIDER_OF_MODEL:
        problems.append(_problem("llm_model", "unknown model id", "enum"))
    if data.background_noise and data.background_type is None:
        problems.append(_problem("background_type", "required when background_noise is true",
                                 "missing"))
    if data.voicemail_type is not None and data.voicemail_type not in VOICEMAIL_TYPES:
        problems.append(_problem("voicemail_type", "must be leave_message or hangup", "enum"))
    elif data.voicemail_detection and data.voicemail_type is None:
        problems.append(_problem("voicemail_type", "required when voicemail_detection is true",
                                 "missing"))
    if data.voicemail_type == "leave_message" and data.voicemail_message is None:
        problems.append(_problem("voicemail_message",
                                 "required when voicemail_type is leave_message", "missing"))
    if data.webhook_url is not None and (problem := _url_problem(data.webhook_url)):
        problems.append(_problem("webhook_url", problem, "url"))
    elif data.webhook and data.webhook_url is None:
        problems.append(_problem("webhook_url", "required when webhook is true", "missing"))
    return problems


async def check_fields(data: CreateAgentRequest, *, allow_private_webhooks: bool) -> None:
    problems = field_problems(data)
    if problems:
        raise APIError(400, "validation_error", "invalid request", details=problems)
    if data.webhook_url is not None:
        try:
            await check_target(data.webhook_url, allow_private=allow_private_webhooks)
        except TargetNotAllowed as exc:
            raise APIError(400, "webhook_url_not_allowed", str(exc)) from None


async def create_agent(scope: TenantScope, data: CreateAgentRequest) -> dict[str, Any]:
    provider = PROVIDER_OF_MODEL[data.llm_model]
    webhook_secret = new_secret()
    async with scope.transaction() as conn:
        if not await conn.fetchval(PROVIDER_CONNECTED, provider):
            raise APIError(400, "llm_provider_not_connected",
                           f"connect the {provider} integration before using {data.llm_model}")
        row = await conn.fetchrow(
            INSERT_AGENT, data.name.strip(), data.voice_id, data.max_duration, data.temperature,
            data.silence_timeout, data.voice_activity_timeout, data.llm_model, data.language,
            data.background_noise, data.background_type, data.voicemail_detection,
            data.voicemail_type, data.voicemail_message, data.backcchanneling, data.is_active,
            data.webhook, data.webhook_url, secrets.encrypt(webhook_secret), data.recording)
    return {**row, "webhook_secret": webhook_secret}


async def get_agent(scope: TenantScope, agent_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_AGENT, agent_id, what="agent")
    return _shown(row)


async def list_agents(scope: TenantScope, limit: int,
                      offset: int) -> tuple[list[dict[str, Any]], int]:
    async with scope.transaction() as conn:
        items, total = await fetch_page(conn, SELECT_AGENTS, COUNT_AGENTS, limit, offset)
    return [_shown(item) for item in items], total


def _shown(row: asyncpg.Record | dict[str, Any]) -> dict[str, Any]:
    """The agent as the API shows it: with its webhook secret readable."""
    return {**row, "webhook_secret": secrets.decrypt(row["webhook_secret"])}
