"""Calling a call campaign's recipients (CONTRACT 10): the handler of its `campaign_calls` due work.

One run is one transaction holding the campaign's row lock, so runs of one campaign (a second
worker, a run past its lease) follow each other and never place the same attempt twice:

1. settle every recipient whose last call ended: `sent` (done) when a person answered and the
   call completed; else `pending` again after the retry delay when the policy names the outcome
   and attempts are left; else `failed`;
2. start a due campaign (recipients fixed), or wait for its calling window;
3. place calls while the campaign has fewer than max_concurrent_calls on the line and the
   sub-account's plan has a free place (under the lock advance_call's place_free takes, so no
   call is created only to wait for a place): each call is written by POST /contacts/{id}/call's
   own rules (api.calls.service.insert_call) in the transaction that marks its recipient called
   (attempts, call_ids), so an attempt has exactly one call, whatever dies when. A contact
   without a phone or with call consent revoked is skipped; any other refusal (funds, the agent)
   pauses the campaign with the reason, as an empty wallet pauses a message campaign;
   once that transaction has committed, the run places the calls it wrote itself
   (api.calls.service.place_written_call), without a `call` job each; each call's own `call`
   work is due PLACING_GRACE later, so a call whose dispatcher died first is placed by it, and
   the call row's lock lets only the first of the two place it;
4. complete it (`campaign.completed`) once every recipient is settled; else say when to run
   again: the end of each of its calls wakes it at once (api.calls.service.finish_call), and it
   looks anyway every POLL while calls are on the line, at the next retry, or at the window's
   next opening.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg

from api.calls.service import (
    DEFAULT_MAX_CONCURRENT_CALLS,
    LOCK_CALL_PLACES,
    SELECT_MAX_CONCURRENT_CALLS,
    NewCall,
    insert_call,
    place_written_call,
)
from api.campaigns import business_hours
from api.campaigns import queries as q
from api.campaigns.schemas import DEFAULT_RETRY_ON
from api.campaigns.service import complete_if_done
from api.wallet import service as wallet
from integrations.telephony import Providers
from tenancy.clock import utcnow
from tenancy.errors import APIError
from tenancy.scope import TenantScope
from tenancy.settings import get_settings

log = logging.getLogger("switchboard.campaigns")

# How often a campaign with calls on the line looks, should a wake-up be lost.
POLL = timedelta(seconds=5)
# How soon a campaign held back only by the plan's limit (calls of others) looks again.
PLAN_FULL_POLL = timedelta(seconds=2)
# How long a call's own `call` work waits for its dispatcher to place it (should the dispatcher
# die between writing the call and placing it, that work places it then).
PLACING_GRACE = timedelta(seconds=10)
# Calls one run places at once (each a tenant transaction and a carrier request).
PLACING_AT_ONCE = 8
# Refusals that concern the recipient, who is skipped; any other pauses the campaign.
SKIPPED_FOR = ("contact_has_no_phone", "contact_opted_out")


@dataclass(frozen=True)
class Retry:
    max_attempts: int
    delay: timedelta
    on: list[str]

    @classmethod
    def of(cls, policy: dict[str, Any] | None) -> Retry:
        policy = policy or {}
        scale = get_settings().campaign_retry_scale
        return cls(
            int(policy.get("max_attempts", 1)),
            timedelta(minutes=int(policy.get("delay_minutes", 60))) * scale,
            list(policy.get("on", DEFAULT_RETRY_ON)),
        )


@dataclass
class Dispatch:
    """One run's view of its campaign (LOCK_CAMPAIGN's row) and what it decided."""

    scope: TenantScope
    campaign: asyncpg.Record
    per_minute: Decimal
    now: datetime
    paused: bool = False
    plan_full: bool = False
    written: list[uuid.UUID] = field(default_factory=list)

    @property
    def id(self) -> uuid.UUID:
        return self.campaign["id"]  # type: ignore[no-any-return]

    def window(self) -> business_hours.BusinessHours | None:
        config = self.campaign["calling_window"]
        return business_hours.parse(config) if config else None


async def dial_campaign(
    scope: TenantScope, campaign_id: uuid.UUID, providers: Providers | None = None
) -> datetime | None:
    """Settle, start, write and complete what is due of one call campaign, then place the calls
    written through `providers` (without them, their own `call` work places them after
    PLACING_GRACE, as when a dispatcher dies before placing); the time to run again, or None
    when nothing is left to follow."""
    run_again, written = await _dial_locked(scope, campaign_id)
    if providers is not None and written:
        await _place_written(scope, providers, written)
    return run_again


async def _place_written(
    scope: TenantScope, providers: Providers, call_ids: list[uuid.UUID]
) -> None:
    """Place the calls a run wrote, PLACING_AT_ONCE at a time; one that fails here is its own
    `call` work's to place."""
    at_once = asyncio.Semaphore(PLACING_AT_ONCE)

    async def place(call_id: uuid.UUID) -> None:
        async with at_once:
            try:
                await place_written_call(scope, providers, call_id)
            except Exception:
                # The call is written: its own `call` work places it after PLACING_GRACE.
                log.warning("call %s left to its own work", call_id, exc_info=True)

    await asyncio.gather(*(place(call_id) for call_id in call_ids))


async def _dial_locked(
    scope: TenantScope, campaign_id: uuid.UUID
) -> tuple[datetime | None, list[uuid.UUID]]:
    """dial_campaign's one transaction, under the campaign's row lock: the time to run again
    and the calls it wrote."""
    per_minute = await wallet.plan_price(scope, "call_per_minute")
    async with scope.transaction() as conn:
        campaign = await conn.fetchrow(q.LOCK_CAMPAIGN, campaign_id)
        if campaign is None or campaign["campaign_type"] != "call":
            return None, []
        run = Dispatch(scope, campaign, per_minute, utcnow())
        return await _advance(conn, run), run.written


async def _advance(conn: asyncpg.Connection, run: Dispatch) -> datetime | None:
    """Settle, start and dispatch the locked campaign; the time to run again."""
    retry = Retry.of(run.campaign["retry"])
    await conn.execute(q.SETTLE, run.id, retry.on, retry.max_attempts, retry.delay)
    status = run.campaign["status"]
    if status == "scheduled":
        waiting = await _start(conn, run)
        if waiting is not None:
            return waiting
        status = "sending"
    if status == "cancelled":
        await conn.execute(q.SKIP_PENDING, run.id, "campaign_cancelled")
    if status != "sending":
        # Paused, cancelled or completed: only the calls still on the line are followed.
        on_line = await conn.fetchval(q.COUNT_ON_THE_LINE, run.id)
        return run.now + POLL if on_line else None
    return await _dispatch(conn, run)


async def _start(conn: asyncpg.Connection, run: Dispatch) -> datetime | None:
    """A scheduled campaign at its start_date starts (recipients fixed) inside its window;
    otherwise the time to look again (start_date, or the window's next opening)."""
    campaign = run.campaign
    if campaign["start_date"] is None or campaign["start_date"] > run.now:
        return campaign["start_date"]  # type: ignore[no-any-return]
    window = run.window()
    if window is not None and not window.is_open(run.now):
        opening = window.next_opening(run.now)
        await conn.execute(q.DEFER, run.id, opening)
        return opening
    await conn.execute(q.START, run.id)
    if campaign["recipients_materialised_at"] is None:
        await conn.execute(
            q.MATERIALISE, run.id, campaign["contact_ids"], campaign["smart_list_id"]
        )
        await conn.execute(q.MARK_MATERIALISED, run.id)
    return None


async def _dispatch(conn: asyncpg.Connection, run: Dispatch) -> datetime | None:
    window = run.window()
    opening = None
    if window is not None and not window.is_open(run.now):
        opening = window.next_opening(run.now)
    else:
        await _place_calls(conn, run)
    if not run.paused and await complete_if_done(conn, run.scope.sub_account_id, run.id):
        log.info("call campaign %s completed", run.id)
        return None
    return await _next_run(conn, run, opening)


async def _next_run(
    conn: asyncpg.Connection, run: Dispatch, opening: datetime | None
) -> datetime | None:
    """The earliest of: a poll while calls are on the line (their ends wake it sooner), a
    retry still to come, the window's opening while anyone is left to call, a poll while only
    the plan's limit held calls back. None when nothing is left to follow."""
    times: list[datetime] = []
    if await conn.fetchval(q.COUNT_ON_THE_LINE, run.id):
        times.append(run.now + POLL)
    if run.paused:
        return min(times, default=None)
    next_call = await conn.fetchval(q.NEXT_ATTEMPT, run.id)
    if next_call is not None and opening is not None:
        times.append(max(next_call, opening))
    elif next_call is not None and next_call > run.now:
        times.append(next_call)
    if run.plan_full:
        times.append(run.now + PLAN_FULL_POLL)
    return min(times, default=None)


async def _place_calls(conn: asyncpg.Connection, run: Dispatch) -> None:
    """As many calls as the campaign's and the plan's free places allow."""
    await conn.execute(LOCK_CALL_PLACES, f"calls:{run.scope.sub_account_id}")
    plan_limit = await conn.fetchval(SELECT_MAX_CONCURRENT_CALLS, run.scope.sub_account_id)
    plan_free = (plan_limit or DEFAULT_MAX_CONCURRENT_CALLS) - await conn.fetchval(
        q.COUNT_OPEN_CALLS
    )
    own_free = run.campaign["max_concurrent_calls"] - await conn.fetchval(
        q.COUNT_ON_THE_LINE, run.id
    )
    free = min(plan_free, own_free)
    while free > 0 and not run.paused:
        due = await conn.fetch(q.CLAIM_DUE, run.id, free)
        if not due:
            return
        for recipient in due:
            if run.paused:
                return
            if await _call(conn, run, recipient):
                free -= 1
    run.plan_full = plan_free <= 0 < own_free


async def _call(conn: asyncpg.Connection, run: Dispatch, recipient: asyncpg.Record) -> bool:
    """Call one recipient (True), or skip it or pause the campaign on a refusal (False)."""
    campaign = run.campaign
    call = NewCall(
        recipient["contact_id"],
        campaign["agent_id"],
        campaign["pool_id"],
        campaign["variables"] or {},
        run.id,
    )
    # A refusal leaves nothing of this attempt (a pool's turn taken, say). The tenant
    # transaction is begun by hand (tenancy.db), so the savepoint is too.
    await conn.execute("SAVEPOINT attempt")
    try:
        call_id = await insert_call(
            conn, run.scope, call, run.per_minute, follow_at=utcnow() + PLACING_GRACE
        )
        await conn.execute(q.MARK_CALLED, recipient["id"], call_id)
    except APIError as refused:
        await conn.execute("ROLLBACK TO SAVEPOINT attempt")
        if refused.code in SKIPPED_FOR:
            await conn.execute(q.MARK_SKIPPED, recipient["id"], refused.code)
        else:
            await conn.execute(q.PAUSE, run.id, f"{refused.code}: {refused.message}")
            run.paused = True
            log.info("call campaign %s paused: %s", run.id, refused.code)
        return False
    await conn.execute("RELEASE SAVEPOINT attempt")
    run.written.append(call_id)
    return True
