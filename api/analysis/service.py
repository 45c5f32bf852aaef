"""A call's analysis (CONTRACT 10 "Analysis"): begun in the transaction that records the call's
end, run later as durable background work (`call_analysis`, tasks.py), exactly once.

- `begin_analysis(conn, sub_account_id, call)`: from finish_call's transaction. A call with at
  least one contact message whose agent has an `analysis` config is `pending` and gets its
  due-work row (in the same transaction); any other call is `skipped` at once.
- `run_analysis(scope, call_id, last_try, call_out)`: the job. It reloads the call and does
  nothing unless its analysis is still `pending`; asks the agent's own model (its vendor, the
  sub-account's key, the vendor base URL of the settings: models.py); then, in one transaction
  guarded by the `pending` status, records the analysis, writes the mapped data to the contact's
  custom fields (a value that does not fit its field is left out and named in `error`, as is one
  not of its data_schema property's type or enum: models.py) and emits `call.analyzed` to
  subscriptions and to the agent's webhook. A vendor failure raises (the due-work engine
  retries it with backoff) except on the last allowed try, which records `failed` with the
  error instead. An answer that still cannot be stored (it is cleaned first, CONTRACT 18a) is
  `failed` at once: another try would only ask the vendor again, on the sub-account's key.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import asyncpg

from api import events
from api.agents.schemas import PROVIDER_OF_MODEL
from api.analysis import models
from api.custom_fields.service import checked_values
from tenancy import secrets
from tenancy.clock import utcnow
from tenancy.due import schedule_due
from tenancy.errors import APIError
from tenancy.scope import TenantScope
from tenancy.settings import get_settings
from tenancy.storable import storable_text

log = logging.getLogger("switchboard.analysis")

ANALYSIS_WORK = "call_analysis"
ANALYZED_EVENT = "call.analyzed"
# What cannot be stored: PostgreSQL's refusal (a NUL, invalid JSON such as NaN) or asyncpg's own,
# a ValueError, for a parameter it cannot encode (a lone surrogate).
UNSTORABLE = (asyncpg.DataError, ValueError)
MAX_ERROR = 500

SELECT_AGENT_ANALYSIS = "SELECT analysis FROM agents WHERE id = $1"

SET_ANALYSIS = "UPDATE calls SET analysis = $2, updated_at = now() WHERE id = $1"

SELECT_PENDING = """
SELECT c.id, c.contact_id, c.agent_id, c.messages, c.analysis, a.llm_model,
       a.analysis AS config
FROM calls AS c JOIN agents AS a ON a.id = c.agent_id
WHERE c.id = $1 AND c.analysis->>'status' = 'pending'
"""

SELECT_VENDOR_KEY = "SELECT api_key FROM integrations WHERE provider = $1"

# Guarded by the pending status: of two runs, one records (the other finds nothing to do).
FINISH_ANALYSIS = """
UPDATE calls SET analysis = $2, updated_at = now()
WHERE id = $1 AND analysis->>'status' = 'pending'
RETURNING id
"""

WRITE_CUSTOM_FIELDS = """
UPDATE contacts SET custom_field_values = custom_field_values || $2::jsonb,
                    updated_at = now()
WHERE id = $1
"""

SELECT_AGENT_WEBHOOK = "SELECT webhook, webhook_url, webhook_secret FROM agents WHERE id = $1"


def analysis_state(
    status: str,
    summary: str | None = None,
    data: dict[str, Any] | None = None,
    success: bool | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The call's `analysis` as GET /calls/{id} shows it."""
    return {"status": status, "summary": summary, "data": data, "success": success, "error": error}


def _contact_spoke(messages: Any) -> bool:
    return any(
        isinstance(m, Mapping) and m.get("role") == "contact" and m.get("text")
        for m in messages or []
    )


async def begin_analysis(
    conn: asyncpg.Connection, sub_account_id: uuid.UUID, call: Mapping[str, Any]
) -> None:
    """The ended call's analysis: `pending` with its due-work row, or `skipped` (no analysis
    config, or no contact message). In the transaction that records the call's end."""
    config = await conn.fetchval(SELECT_AGENT_ANALYSIS, call["agent_id"])
    if config is None or not _contact_spoke(call["messages"]):
        await conn.execute(SET_ANALYSIS, call["id"], analysis_state("skipped"))
        return
    await conn.execute(SET_ANALYSIS, call["id"], analysis_state("pending"))
    await schedule_due(conn, sub_account_id, ANALYSIS_WORK, call["id"], utcnow())


# --- the job ----------------------------------------------------------------------------------


def last_try(failures: int) -> bool:
    """Whether a run after `failures` failed runs in a row is the last the engine allows."""
    return failures + 1 >= get_settings().due_work_max_failures


async def run_analysis(
    scope: TenantScope,
    call_id: uuid.UUID,
    final: bool,
    call_out: Callable[[Mapping[str, Any], uuid.UUID], dict[str, Any]],
    select_call: str,
) -> None:
    """Analyse the call unless its analysis is no longer pending (module doc). `call_out` and
    `select_call` show the call as the calls feature does, for the event."""
    async with scope.transaction() as conn:
        call = await conn.fetchrow(SELECT_PENDING, call_id)
        if call is None:
            return
        vendor = PROVIDER_OF_MODEL.get(call["llm_model"], "openai")
        key = await conn.fetchval(SELECT_VENDOR_KEY, vendor)
    config = call["config"]
    if config is None:  # the agent's analysis was turned off since the call ended
        await _finish(scope, call, analysis_state("skipped"), {}, call_out, select_call)
        return
    if key is None:
        await _finish(
            scope,
            call,
            analysis_state("failed", error=f"llm_error: the {vendor} integration is not connected"),
            {},
            call_out,
            select_call,
        )
        return
    ask = models.Ask(
        vendor,
        call["llm_model"],
        secrets.decrypt(key),
        get_settings().vendor_base_url(vendor),
        bool(config.get("summary", True)),
        config.get("success_criteria"),
        config.get("data_schema"),
    )
    try:
        answer = await models.analyse(ask, models.transcript_text(call["messages"] or []))
    except models.VendorFailed as exc:
        if not final:
            raise
        log.warning("call %s: analysis failed for good: %s", call_id, exc)
        await _finish(
            scope, call, analysis_state("failed", error=str(exc)), {}, call_out, select_call
        )
        return
    state = analysis_state(
        "completed", answer.summary, answer.data, answer.success, "; ".join(answer.left_out) or None
    )
    mapping = (config.get("custom_field_map") or {}) if answer.data else {}
    try:
        await _finish(scope, call, state, mapping, call_out, select_call)
    except UNSTORABLE as exc:
        log.warning("call %s: the analysis could not be stored: %s", call_id, exc)
        error = storable_text(f"storage_error: the analysis could not be stored: {exc}")
        await _finish(
            scope,
            call,
            analysis_state("failed", error=error[:MAX_ERROR]),
            {},
            call_out,
            select_call,
        )


async def _finish(
    scope: TenantScope,
    call: asyncpg.Record,
    state: dict[str, Any],
    mapping: dict[str, str],
    call_out: Callable[[Mapping[str, Any], uuid.UUID], dict[str, Any]],
    select_call: str,
) -> None:
    async with scope.transaction() as conn:
        to_set, problems = await _mapped_values(conn, state["data"] or {}, mapping)
        if problems:
            state = {**state, "error": "; ".join([*filter(None, [state["error"]]), *problems])}
        if await conn.fetchval(FINISH_ANALYSIS, call["id"], state) is None:
            return
        if to_set:
            await conn.execute(WRITE_CUSTOM_FIELDS, call["contact_id"], to_set)
        if state["status"] == "skipped":
            return
        row = await conn.fetchrow(select_call, call["id"])
        event = await events.emit(
            conn,
            ANALYZED_EVENT,
            {"sub_account_id": scope.sub_account_id, "call": call_out(row, scope.sub_account_id)},
        )
        agent = await conn.fetchrow(SELECT_AGENT_WEBHOOK, call["agent_id"])
        if agent["webhook"] and agent["webhook_url"]:
            await events.emit_to(
                conn,
                event,
                agent["webhook_url"],
                secrets.decrypt(agent["webhook_secret"]),
                call["agent_id"],
            )


async def _mapped_values(
    conn: asyncpg.Connection, data: dict[str, Any], mapping: dict[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """The custom field values the mapped data sets, each checked against its field as
    POST /contacts checks it; and what was left out, naming the property and its field."""
    to_set: dict[str, Any] = {}
    problems: list[str] = []
    for prop, key in mapping.items():
        value = data.get(prop)
        if value is None:
            continue
        try:
            values, _ = await checked_values(conn, {key: value})
        except APIError as exc:
            reason = "; ".join(d.get("message", "") for d in exc.details or []) or exc.message
            problems.append(f"data.{prop} was not written to custom field {key}: {reason}")
            continue
        to_set.update(values)
    return to_set, problems
