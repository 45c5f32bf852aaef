"""Outbound AI calls: the checks and caller ID of a new call, then its life in the worker.

A call is a row (`queued`) and an entry in the durable scheduler, written in one transaction, so
a call that was accepted is placed even if the queue loses its job. The worker's handler
(`advance_call`) places it through the provider (`ringing`), follows it (`in_progress`), and
when it ends records the outcome, charges the started minutes at the plan's `call_per_minute`
and, when the agent has `webhook` on, queues the signed `call.completed` delivery, all in one
transaction guarded by the call's status, so a second run changes and charges nothing.
A call campaign's dispatcher places the calls it writes itself (`place_written_call`), their
`call` work deferred a little as the fallback should it die before placing them.
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg

from api import events
from api.analysis.service import begin_analysis
from api.calls.context import rendered_instructions
from api.consent.service import ensure_allowed
from api.number_pools.service import next_caller_id
from api.tools.service import agent_tools
from api.wallet import service as wallet
from integrations import recordings
from integrations.telephony import (
    CallState,
    OutboundCall,
    Providers,
    TelephonyError,
    TelephonyProvider,
)
from tenancy import secrets
from tenancy.call_tokens import stream_parameters
from tenancy.clock import utcnow
from tenancy.db import fetch_newest_page, fetch_one_or_404
from tenancy.due import cancel_due, schedule_due
from tenancy.errors import APIError, not_found
from tenancy.recording_links import recording_url
from tenancy.recordings import RecordingsMisconfigured, recording_store
from tenancy.scope import TenantScope
from tenancy.settings import get_settings
from tenancy.storable import storable

log = logging.getLogger("switchboard.calls")

CALL_WORK = "call"
# The due work of a call campaign (api/campaigns): woken when one of its calls ends, so the
# campaign settles that recipient and places the next call at once.
CAMPAIGN_CALLS_WORK = "campaign_calls"
OPEN_STATUSES = ("queued", "ringing", "in_progress")
# How long past its agent's max_duration a call may stay unfinished before we stop following it.
TRACKING_GRACE = timedelta(minutes=10)
# How long after the carrier reports the end of a call the runtime answered we wait for the
# runtime's own record of it.
RUNTIME_GRACE = timedelta(seconds=60)
# A sub-account without a plan, or whose plan says nothing, has this many calls at once.
DEFAULT_MAX_CONCURRENT_CALLS = 10
# How soon a call waiting for a free place looks again.
SLOT_POLL = timedelta(seconds=1)

CALL_COLUMNS = """
id, contact_id, agent_id, from_number, to_number, status, started_at, ended_at,
duration_seconds, transcript, recording_url, recording_key, direction, ended_reason,
answered_by, messages, cost, error, variables, tool_calls, transferred_to, analysis, start_at
"""

SELECT_CONTACT = "SELECT id, phone FROM contacts WHERE id = $1"

# KEY SHARE: a deletion of the agent (FOR UPDATE) either sees this call or makes us wait and
# find the agent gone.
SELECT_AGENT = """
SELECT id, is_active FROM agents WHERE id = $1 AND deleted_at IS NULL
FOR KEY SHARE
"""

SELECT_AGENT_NUMBER = """
SELECT id, phone_number, provider FROM phone_numbers
WHERE agent_id = $1 AND is_active
ORDER BY assigned_at, phone_number
LIMIT 1
"""

SELECT_BALANCE = "SELECT balance FROM wallet WHERE id = 1"

LOCK_BALANCE = "SELECT balance FROM wallet WHERE id = 1 FOR UPDATE"

INSERT_CALL = """
INSERT INTO calls (contact_id, agent_id, phone_number_id, pool_id, from_number, to_number,
                   provider, variables, campaign_id, start_at, status)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
        CASE WHEN $10::timestamptz IS NULL THEN 'queued' ELSE 'scheduled' END)
RETURNING id
"""

SELECT_CALL = f"SELECT {CALL_COLUMNS} FROM calls WHERE id = $1"

LOCK_OPEN_CALL = """
SELECT c.id, c.status, c.provider, c.provider_call_id, c.from_number, c.to_number, c.agent_id,
       c.started_at, c.created_at, a.language, a.max_duration, a.recording,
       c.direction, c.answered_by, a.voicemail_detection, c.contact_id, c.start_at,
       c.campaign_id
FROM calls AS c JOIN agents AS a ON a.id = c.agent_id
WHERE c.id = $1 AND c.status IN ('scheduled', 'queued', 'ringing', 'in_progress')
FOR UPDATE OF c
"""

# A scheduled call whose start_at has come waits for a free place as any queued call does.
MARK_DUE = "UPDATE calls SET status = 'queued', updated_at = now() WHERE id = $1"

# The number to dial is the contact's phone as it is when the call is placed.
SET_CALLEE = "UPDATE calls SET to_number = $2, updated_at = now() WHERE id = $1"

LOCK_CALL = "SELECT id, status, provider_call_id, campaign_id FROM calls WHERE id = $1 FOR UPDATE"

MARK_CANCELLED = "UPDATE calls SET status = 'cancelled', updated_at = now() WHERE id = $1"

MARK_PLACED = """
UPDATE calls SET status = 'ringing', provider_call_id = $2, started_at = now(),
                 updated_at = now()
WHERE id = $1
"""

# A placed call whose stream the voice runtime refused at its call limit waits `queued` again
# while the carrier dials again; only the runtime's admission (MARK_ANSWERED) puts a call
# in_progress, never the carrier's report (CONTRACT 11).
MARK_WAITING_FOR_RUNTIME = """
UPDATE calls SET status = 'queued', updated_at = now()
WHERE id = $1 AND status = 'ringing' AND answered_by IS NULL
"""

FINISH = f"""
UPDATE calls
SET status = $2, started_at = COALESCE($3, started_at), ended_at = COALESCE($4, now()),
    duration_seconds = $5, transcript = $6, recording_url = $7, error = $8,
    ended_reason = COALESCE($9, CASE WHEN $2 = 'completed' THEN 'customer_hangup'
                                     ELSE 'failed' END),
    answered_by = COALESCE($10, answered_by), messages = COALESCE($11, messages),
    recording_key = $12, tool_calls = COALESCE($13, tool_calls),
    transferred_to = COALESCE($14, transferred_to), updated_at = now()
WHERE id = $1 AND status IN ('queued', 'ringing', 'in_progress')
RETURNING {CALL_COLUMNS}, campaign_id
"""

LOCK_CALL_PLACES = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

SELECT_MAX_CONCURRENT_CALLS = """
SELECT p.max_concurrent_calls
FROM control.sub_accounts AS s LEFT JOIN control.plans AS p ON p.id = s.plan_id
WHERE s.id = $1
"""

# Calls on the line, calls queued before this one (oldest first), and a call campaign's queued
# calls, whose places their dispatcher has taken already.
COUNT_CALLS_AHEAD = """
SELECT count(*) FROM calls
WHERE status IN ('ringing', 'in_progress')
   OR (status = 'queued' AND ((created_at, id) < ($1, $2) OR campaign_id IS NOT NULL))
"""

RECORD_CHARGE = "UPDATE calls SET billed_minutes = $2, cost = $3 WHERE id = $1"

SELECT_RECORDING_KEY = "SELECT recording_key FROM calls WHERE id = $1"

SELECT_AGENT_WEBHOOK = "SELECT webhook, webhook_url, webhook_secret FROM agents WHERE id = $1"


def billed_minutes(duration_seconds: int | None) -> int:
    """Every started minute counts."""
    return math.ceil((duration_seconds or 0) / 60)


def call_out(row: asyncpg.Record | dict[str, Any], sub_account_id: uuid.UUID) -> dict[str, Any]:
    """The call as GET /calls/{id} and the post-call webhook show it."""
    out = {
        key: row[key]
        for key in (
            "id",
            "contact_id",
            "agent_id",
            "direction",
            "from_number",
            "to_number",
            "status",
            "started_at",
            "ended_at",
            "duration_seconds",
            "ended_reason",
            "answered_by",
            "transcript",
            "messages",
            "error",
            "variables",
            "tool_calls",
            "transferred_to",
            "analysis",
            "start_at",
        )
    }
    # A recording we keep is shown as a freshly signed link; one the carrier keeps (Twilio's
    # own URL) as the carrier gave it.
    out["recording_url"] = (
        recording_url(get_settings(), sub_account_id, row["id"])
        if row["recording_key"]
        else row["recording_url"]
    )
    # What the wallet was charged: nothing until a completed call is charged.
    out["cost"] = row["cost"] if row["cost"] is not None else Decimal("0.00")
    return out


SELECT_CALL_FOR_RUNTIME = """
SELECT c.id, c.status, c.direction, c.contact_id, c.provider, c.provider_call_id,
       a.id AS agent_id, a.llm_model, a.temperature, a.prompt,
       a.language, a.voice_id, a.transcriber, a.first_message, a.silence_timeout,
       a.voice_activity_timeout, a.max_duration, a.voicemail_detection, a.voicemail_type,
       a.voicemail_message, a.recording, a.backcchanneling, a.background_noise,
       a.background_type
FROM calls AS c JOIN agents AS a ON a.id = c.agent_id
WHERE c.id = $1
"""

# The carrier may report the call in progress (MARK_PROGRESS) before its stream reaches the
# runtime; the runtime answers a call once.
MARK_ANSWERED = """
UPDATE calls SET status = 'in_progress', answered_by = $2, updated_at = now()
WHERE id = $1 AND answered_by IS NULL AND status IN ('queued', 'ringing', 'in_progress')
RETURNING id
"""

SELECT_VENDOR_KEYS = "SELECT provider, api_key FROM integrations"


# --- requests ---------------------------------------------------------------------------------


async def place_call(
    scope: TenantScope,
    contact_id: uuid.UUID,
    agent_id: uuid.UUID,
    pool_id: uuid.UUID | None,
    variables: dict[str, str] | None = None,
    start_at: datetime | None = None,
) -> uuid.UUID:
    """Queue an outbound call, or schedule it for `start_at`; `variables` (checked by the
    caller) fill the placeholders of the agent's prompt and first_message (CONTRACT 10)."""
    per_minute = await wallet.plan_price(scope, "call_per_minute")
    call = NewCall(contact_id, agent_id, pool_id, variables or {}, start_at=start_at)
    try:
        async with scope.transaction() as conn:
            return await insert_call(conn, scope, call, per_minute)
    except APIError as exc:
        if exc.code == "insufficient_funds":
            await wallet.record_declined(
                scope, per_minute, "call", "outbound call, first minute", "call", None
            )
        raise


@dataclass(frozen=True)
class NewCall:
    """An outbound call to write: to `contact_id` by `agent_id`, its caller id from `pool_id`
    (round-robin) or else the agent's own number; `campaign_id` when a call campaign places it;
    `start_at` when it is placed later (`scheduled` until then, CONTRACT 10)."""

    contact_id: uuid.UUID
    agent_id: uuid.UUID
    pool_id: uuid.UUID | None
    variables: dict[str, str]
    campaign_id: uuid.UUID | None = None
    start_at: datetime | None = None


async def insert_call(
    conn: asyncpg.Connection,
    scope: TenantScope,
    call: NewCall,
    per_minute: Decimal,
    follow_at: datetime | None = None,
) -> uuid.UUID:
    """Write a `queued` (or `scheduled`) call and its due-work row (due at once, or at
    start_at, or at `follow_at` when the caller places the call itself with
    place_written_call and that work is only its fallback) in the caller's transaction under POST
    /contacts/{id}/call's rules (contact with a phone and call consent, active agent, a caller
    id, funds for a first minute at `per_minute`), so a caller that records more in the same
    transaction (a campaign's recipient) either has both or neither. Raises APIError (nothing
    written) when a rule refuses; the caller records a declined charge if it wants one."""
    to_number = await _callee(conn, call.contact_id, call.agent_id)
    number = (
        await next_caller_id(conn, call.pool_id)
        if call.pool_id is not None
        else await _agent_number(conn, call.agent_id)
    )
    await _ensure_funds(conn, per_minute)
    call_id: uuid.UUID = await conn.fetchval(
        INSERT_CALL,
        call.contact_id,
        call.agent_id,
        number["id"],
        call.pool_id,
        number["phone_number"],
        to_number,
        number["provider"],
        call.variables,
        call.campaign_id,
        call.start_at,
    )
    due_at = follow_at or call.start_at or utcnow()
    await schedule_due(conn, scope.sub_account_id, CALL_WORK, call_id, due_at)
    return call_id


async def _ensure_funds(conn: asyncpg.Connection, per_minute: Decimal) -> None:
    if per_minute > 0 and await conn.fetchval(SELECT_BALANCE) < per_minute:
        raise APIError(
            402,
            "insufficient_funds",
            "the wallet balance cannot cover a minute of this call",
        )


async def _callee(conn: asyncpg.Connection, contact_id: uuid.UUID, agent_id: uuid.UUID) -> str:
    contact = await fetch_one_or_404(conn, SELECT_CONTACT, contact_id, what="contact")
    agent = await fetch_one_or_404(conn, SELECT_AGENT, agent_id, what="agent")
    if not contact["phone"]:
        raise APIError(400, "contact_has_no_phone", "the contact has no phone number on file")
    if not agent["is_active"]:
        raise APIError(400, "agent_inactive", "the agent is inactive and takes no calls")
    await ensure_allowed(conn, contact_id, "call")
    return str(contact["phone"])


async def _agent_number(conn: asyncpg.Connection, agent_id: uuid.UUID) -> asyncpg.Record:
    number = await conn.fetchrow(SELECT_AGENT_NUMBER, agent_id)
    if number is None:
        raise APIError(
            400,
            "agent_has_no_number",
            "the agent has no phone number; assign one or give a pool_id",
        )
    return number


async def get_call(scope: TenantScope, call_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_CALL, call_id, what="call")
    return call_out(row, scope.sub_account_id)


@dataclass(frozen=True)
class CallSearch:
    """Which calls GET /calls lists: each value asked for narrows it; None is any."""

    contact_id: uuid.UUID | None = None
    agent_id: uuid.UUID | None = None
    status: str | None = None
    direction: str | None = None


async def list_calls(
    scope: TenantScope, search: CallSearch, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of calls, newest first, each as GET /calls/{id} shows it."""
    conditions: list[tuple[str, Any]] = [
        ("contact_id = $?", search.contact_id),
        ("agent_id = $?", search.agent_id),
        ("status = $?", search.status),
        ("direction = $?", search.direction),
    ]
    async with scope.transaction() as conn:
        rows, total = await fetch_newest_page(
            conn, "calls", CALL_COLUMNS, conditions, limit, offset
        )
    return [call_out(row, scope.sub_account_id) for row in rows], total


# --- the worker's side ------------------------------------------------------------------------


def _poll_after(started_at: datetime | None) -> datetime:
    """Follow a young call closely, a long one less often."""
    now = utcnow()
    young = started_at is None or now - started_at < timedelta(seconds=30)
    return now + timedelta(seconds=1 if young else 5)


async def advance_call(
    scope: TenantScope, providers: Providers, call_id: uuid.UUID
) -> datetime | None:
    """One step of a call's life; the time to look again, or None once it has ended."""
    async with scope.transaction() as conn:
        call = await conn.fetchrow(LOCK_OPEN_CALL, call_id)
        if call is None:
            return None
        refusal = None
        never_connected: CallState | None = None
        # A scheduled call meets POST /contacts/{id}/call's rules once, when its time comes;
        # then it is `queued` and waits for a place like any other call.
        if call["status"] == "scheduled":
            start_at: datetime = call["start_at"]
            if start_at > utcnow():
                return start_at
            refusal = await _due_refusal(conn, scope, call)
            call = await conn.fetchrow(LOCK_OPEN_CALL, call_id)
        # The provider that holds the caller ID places the call and reports on it.
        provider = providers.get(call["provider"])
        if refusal is not None:
            never_connected = CallState("failed", ended_reason="failed", error=refusal)
        elif call["status"] == "queued" and call["provider_call_id"] is not None:
            given_up = await _held_given_up(provider, call)
            if given_up is None:
                return utcnow() + SLOT_POLL
            never_connected = given_up
        elif call["status"] == "queued":
            # A call campaign's call had its place counted when its dispatcher wrote it, under
            # the lock place_free takes (api/campaigns/dialer.py): it is placed at once, not
            # after every other call of the round has taken that lock in turn.
            if call["campaign_id"] is None and not await place_free(
                conn, scope.sub_account_id, call
            ):
                return utcnow() + SLOT_POLL
            never_connected = await _dial(conn, scope, provider, call)
            if never_connected is None:
                return _poll_after(None)
    if never_connected is not None:
        await finish_call(scope, call_id, never_connected)
        return None
    try:
        state = await provider.call_state(call["provider_call_id"])
    except TelephonyError as exc:
        log.warning("reading call %s failed: %s", call_id, exc)
        state = None
    if state is not None and state.finished and not left_to_runtime(call, state):
        await finish_call(scope, call_id, state)
        return None
    started = call["started_at"] or call["created_at"]
    if utcnow() - started > timedelta(minutes=call["max_duration"]) + TRACKING_GRACE:
        await finish_call(
            scope,
            call_id,
            CallState(
                "failed",
                ended_reason="failed",
                error="voice_unavailable: the call's outcome never arrived",
            ),
        )
        return None
    # A carrier's end the runtime has still to record is not the call's status: the runtime's
    # record (or, RUNTIME_GRACE later, the carrier's) ends it through finish_call, exactly once.
    # Nor is the carrier's "in progress": the call is in_progress once the runtime admitted its
    # stream (answer_call).
    return _poll_after(started)


async def _dial(
    conn: asyncpg.Connection,
    scope: TenantScope,
    provider: TelephonyProvider,
    call: asyncpg.Record,
) -> CallState | None:
    """Hand the queued call (LOCK_OPEN_CALL's row, locked) to its carrier and mark it
    `ringing` (None), or the state of a call the carrier refused (it never connected)."""
    try:
        provider_call_id = await provider.place_call(carrier_call(call, scope.sub_account_id))
    except TelephonyError as exc:
        log.warning("placing call %s failed: %s", call["id"], exc)
        return CallState("failed", ended_reason="failed", error=f"provider_error: {exc}")
    await conn.execute(MARK_PLACED, call["id"], provider_call_id)
    return None


async def place_written_call(scope: TenantScope, providers: Providers, call_id: uuid.UUID) -> None:
    """Place at once a call campaign's call that its dispatcher wrote (`queued`, its place
    counted, its `call` work deferred by insert_call's `follow_at`), and move that work to the
    call's first look, in one transaction. The call row's lock orders this against the call's
    own work and a cancel: whoever comes second finds it placed (or cancelled) and leaves it,
    so it is placed once. Should the dispatcher die first, that work places it."""
    async with scope.transaction() as conn:
        call = await conn.fetchrow(LOCK_OPEN_CALL, call_id)
        if (
            call is None
            or call["campaign_id"] is None
            or call["status"] != "queued"
            or call["provider_call_id"] is not None
            or call["start_at"] is not None
        ):
            return
        never_connected = await _dial(conn, scope, providers.get(call["provider"]), call)
        if never_connected is None:
            await schedule_due(conn, scope.sub_account_id, CALL_WORK, call_id, _poll_after(None))
            return
    await finish_call(scope, call_id, never_connected)


async def _due_refusal(
    conn: asyncpg.Connection, scope: TenantScope, call: asyncpg.Record
) -> str | None:
    """A scheduled call whose start_at has come is `queued`, under POST /contacts/{id}/call's
    rules as they stand now (they may have changed since it was scheduled): why it may not be
    placed (the call's `error`), or None, with the contact's phone now as the number to dial."""
    await conn.execute(MARK_DUE, call["id"])
    try:
        to_number = await _callee(conn, call["contact_id"], call["agent_id"])
        await _ensure_funds(conn, await wallet.plan_price(scope, "call_per_minute"))
    except APIError as exc:
        if exc.status == 404:
            return "agent_deleted: the agent was deleted before the call was placed"
        return f"{exc.code}: {exc.message}"
    if to_number != call["to_number"]:
        await conn.execute(SET_CALLEE, call["id"], to_number)
    return None


async def cancel_call(scope: TenantScope, call_id: uuid.UUID) -> dict[str, Any]:
    """Cancel an outbound call not yet placed (`scheduled`, or `queued` and never dialled):
    `cancelled`, with no started_at and no ended_reason. 409 `not_cancellable` once it was
    placed or ended. The call row's lock orders a cancel and the call's due run: the run
    re-reads the status under it, so exactly one of them wins."""
    async with scope.transaction() as conn:
        call = await fetch_one_or_404(conn, LOCK_CALL, call_id, what="call")
        placed = call["provider_call_id"] is not None
        if call["status"] not in ("scheduled", "queued") or placed:
            raise APIError(
                409,
                "not_cancellable",
                f"the call is {'placed' if placed else call['status']}; only a call not yet "
                "placed can be cancelled",
            )
        await conn.execute(MARK_CANCELLED, call_id)
        await cancel_due(conn, CALL_WORK, call_id)
        if call["campaign_id"] is not None:
            await schedule_due(
                conn, scope.sub_account_id, CAMPAIGN_CALLS_WORK, call["campaign_id"], utcnow()
            )
        row = await conn.fetchrow(SELECT_CALL, call_id)
    return call_out(row, scope.sub_account_id)


async def _held_given_up(provider: Any, call: asyncpg.Record) -> CallState | None:
    """A call already on the line and waiting: an inbound call held until the sub-account has
    a free place (its carrier connects it when it asks again, `inbound.answer_twilio`), or a
    call whose stream a voice runtime at its call limit refused (its carrier dials again). The
    worker only ends it (the returned state) when the carrier gave up waiting."""
    try:
        state = await provider.call_state(call["provider_call_id"])
    except TelephonyError as exc:
        log.warning("reading held call %s failed: %s", call["id"], exc)
        return None
    if not state.finished:
        return None
    if call["direction"] == "outbound":  # its stream was refused until the carrier gave up
        return CallState(
            "failed",
            ended_at=state.ended_at,
            ended_reason="failed",
            error=state.error
            if state.status == "failed" and state.error
            else "voice_unavailable: the voice runtime stayed at its call limit",
        )
    return CallState(
        "failed",
        ended_at=state.ended_at,
        ended_reason="no_answer",
        error="provider_error: the caller hung up before a line was free",
    )


async def place_free(
    conn: asyncpg.Connection, sub_account_id: uuid.UUID, call: asyncpg.Record
) -> bool:
    """Whether the queued call may be placed now: the sub-account has fewer calls on the line
    than its plan's max_concurrent_calls, counting the older queued calls first (CONTRACT 6).

    A transaction lock per sub-account makes the count and the placing one step, so two workers
    never both take the last place."""
    await conn.execute(LOCK_CALL_PLACES, f"calls:{sub_account_id}")
    limit = await conn.fetchval(SELECT_MAX_CONCURRENT_CALLS, sub_account_id)
    taken = await conn.fetchval(COUNT_CALLS_AHEAD, call["created_at"], call["id"])
    return bool(taken < (limit or DEFAULT_MAX_CONCURRENT_CALLS))


def carrier_call(call: asyncpg.Record, sub_account_id: uuid.UUID) -> OutboundCall:
    """What the carrier needs to connect the call (LOCK_OPEN_CALL's row) to the voice runtime."""
    return OutboundCall(
        str(call["id"]),
        call["from_number"],
        call["to_number"],
        str(call["agent_id"]),
        call["language"],
        int(call["max_duration"] * 60),
        call["recording"],
        stream_parameters(get_settings(), sub_account_id, call["id"]),
        voicemail_detection=call["voicemail_detection"],
        direction=call["direction"],
    )


def left_to_runtime(call: asyncpg.Record, state: CallState) -> bool:
    """A call the voice runtime answered is its to record (transcript, reason) when it ends; the
    carrier's own end is the fallback for a runtime that never reports, RUNTIME_GRACE later."""
    if call["answered_by"] is None:
        return False
    ended = state.ended_at or utcnow()
    return utcnow() - ended < RUNTIME_GRACE


async def finish_call(
    scope: TenantScope, call_id: uuid.UUID, state: CallState, recording_key: str | None = None
) -> None:
    """Record the end of a call, charge it and queue its post-call webhook, exactly once.

    A completed call is charged its started minutes; a failed one (never connected, or a
    vendor failed) is not charged. Either is an event (`call.completed`, `call.failed`) for the
    subscriptions that want it and for the agent's webhook when it has one on.

    `state.recording` (a whole WAV) is kept in the recordings store first, so the call's
    `recording_key` never names a recording that was not written; a store that fails costs
    the recording, not the call's record. What the call's tools and model gave is stored cleaned
    (`storable_state`), so nothing they returned keeps the record, recording or charge out."""
    state = storable_state(state)
    if state.recording is not None:
        recording_key = await _keep_recording(scope.sub_account_id, call_id, state.recording)
    per_minute = await wallet.plan_price(scope, "call_per_minute")
    async with scope.transaction() as conn:
        row = await conn.fetchrow(
            FINISH,
            call_id,
            state.status,
            state.started_at,
            state.ended_at,
            state.duration_seconds,
            state.transcript,
            state.recording_url,
            state.error,
            state.ended_reason,
            state.answered_by,
            state.messages,
            recording_key,
            state.tool_calls,
            state.transferred_to,
        )
        if row is None:
            return
        await begin_analysis(conn, scope.sub_account_id, row)
        if row["campaign_id"] is not None:
            await schedule_due(
                conn, scope.sub_account_id, CAMPAIGN_CALLS_WORK, row["campaign_id"], utcnow()
            )
        if state.status == "completed":
            minutes = billed_minutes(state.duration_seconds)
            charged = await _charge(conn, call_id, minutes, per_minute)
            await conn.execute(RECORD_CHARGE, call_id, minutes, charged)
        row = await conn.fetchrow(SELECT_CALL, call_id)
        event = await events.emit(
            conn,
            f"call.{state.status}",
            {"sub_account_id": scope.sub_account_id, "call": call_out(row, scope.sub_account_id)},
        )
        agent = await conn.fetchrow(SELECT_AGENT_WEBHOOK, row["agent_id"])
        if agent["webhook"] and agent["webhook_url"]:
            await events.emit_to(
                conn,
                event,
                agent["webhook_url"],
                secrets.decrypt(agent["webhook_secret"]),
                row["agent_id"],
            )


def storable_state(state: CallState) -> CallState:
    """The call's end as PostgreSQL can hold it (CONTRACT 18a): the transcript, messages, tool
    calls and error the runtime's model, tools and vendors gave, cleaned."""
    return replace(
        state,
        transcript=storable(state.transcript),
        error=storable(state.error),
        messages=storable(state.messages),
        tool_calls=storable(state.tool_calls),
    )


async def _keep_recording(sub_account_id: uuid.UUID, call_id: uuid.UUID, wav: bytes) -> str | None:
    key = recordings.recording_key(sub_account_id, call_id)
    try:
        await recording_store().put(key, wav)
    except (recordings.RecordingStoreError, RecordingsMisconfigured) as exc:
        log.error("call %s: the recording was not kept: %s", call_id, exc)
        return None
    return key


# --- the recording link -----------------------------------------------------------------------


async def call_recording(scope: TenantScope | None, call_id: uuid.UUID) -> bytes:
    """The call's WAV for a signed link; 404 unless the sub-account is active (`scope`, from
    `TenantScope.of_active_sub_account`) and the call has a recording that is still kept."""
    if scope is None:
        raise not_found("recording")
    async with scope.transaction() as conn:
        key = await conn.fetchval(SELECT_RECORDING_KEY, call_id)
    # Only this call's own key is read, whatever the row holds.
    if key != recordings.recording_key(scope.sub_account_id, call_id):
        raise not_found("recording")
    try:
        wav = await recording_store().get(key)
    except (recordings.RecordingStoreError, RecordingsMisconfigured) as exc:
        log.error("call %s: the recording could not be read: %s", call_id, exc)
        raise APIError(
            503,
            "service_unavailable",
            "the recording cannot be read now; retry shortly",
            headers={"Retry-After": "5"},
        ) from None
    if wav is None:
        raise not_found("recording")
    return wav


async def _charge(
    conn: asyncpg.Connection, call_id: uuid.UUID, minutes: int, per_minute: Decimal
) -> Decimal:
    """The minutes at the plan's price; a call already made takes at most what is left."""
    cost = per_minute * minutes
    if cost <= 0:
        return Decimal("0.00")
    balance: Decimal = await conn.fetchval(LOCK_BALANCE)
    amount = min(cost, balance)
    if amount < cost:
        log.warning("call %s cost %s but the wallet held %s", call_id, cost, balance)
    if amount > 0:
        await wallet.debit(conn, amount, "call", f"outbound call, {minutes} min", "call", call_id)
    return amount


async def wait_for_runtime(scope: TenantScope, call_id: uuid.UUID) -> None:
    """The voice runtime refused the call's stream at its call limit: a placed call is `queued`
    again (never in_progress) while its carrier dials again; admission answers it."""
    async with scope.transaction() as conn:
        await conn.execute(MARK_WAITING_FOR_RUNTIME, call_id)


@dataclass(frozen=True)
class AnsweredCall:
    """What the voice runtime needs of a call it answered: the call with its agent's settings
    (SELECT_CALL_FOR_RUNTIME), the sub-account's vendor keys (decrypted), the agent's prompt and
    first_message with the call's context filled in (CONTRACT 10 "Context"), and the agent's
    tools as the runtime offers and calls them (`api.tools.service.agent_tools`)."""

    record: asyncpg.Record
    keys: dict[str, str]
    prompt: str
    first_message: str | None
    tools: list[dict[str, Any]]


async def answer_call(
    scope: TenantScope, call_id: uuid.UUID, answered_by: str
) -> AnsweredCall | None:
    """The voice runtime's start of a call: mark it answered and return it (AnsweredCall);
    None for a call that is not waiting to be answered."""
    async with scope.transaction() as conn:
        call = await conn.fetchrow(SELECT_CALL_FOR_RUNTIME, call_id)
        marked = await conn.fetchval(MARK_ANSWERED, call_id, answered_by)
        if call is None or marked is None:
            return None
        keys = {
            row["provider"]: secrets.decrypt(row["api_key"])
            for row in await conn.fetch(SELECT_VENDOR_KEYS)
        }
        prompt, first_message = await rendered_instructions(conn, call_id)
        tools = await agent_tools(conn, call["agent_id"])
    return AnsweredCall(call, keys, prompt, first_message, tools)
