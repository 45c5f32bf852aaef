"""Webhook delivery: one signed attempt per run of a `webhook_delivery` due-work row.

Attempts: at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, each delay times
`SWITCHBOARD_WEBHOOK_RETRY_SCALE`. A 2xx delivers; 410 Gone disables the subscription; a target
refused by the SSRF guard (a non-public address) fails at once; timeouts
(`SWITCHBOARD_WEBHOOK_TIMEOUT_SECONDS`), names that do not resolve, network errors and other
statuses retry.
Every attempt is recorded in `webhook_attempts`; the delivery row holds the outcome.

Fairness (CONTRACT 11): at most RUNS_PER_TARGET attempts to one target (a subscription, or an
agent's post-call webhook) and `SWITCHBOARD_WEBHOOK_SUB_ACCOUNT_CONCURRENCY` attempts of one
sub-account are in flight at once, across workers (slots in Redis, tenancy/due.py). A run that
finds no slot makes no attempt: it is not in the delivery's log and takes nothing from its retry
schedule; it waits, and each run that gives a slot back wakes the delivery of the sub-account
that has waited longest (same target first). Should a wake-up be lost, it looks again on its own
after THROTTLED_WAIT_SECONDS, doubled each time up to THROTTLED_WAIT_MAX_SECONDS.
"""

from __future__ import annotations

import hashlib
import logging
import random
import uuid
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from api.events import DELIVERY_KIND
from api.webhook_subscriptions.service import disable_subscription
from integrations import webhooks
from integrations.webhooks import AttemptResult
from tenancy import secrets
from tenancy.clock import utcnow
from tenancy.db import tenant_transaction
from tenancy.due import DueWork, RunGroup, give_back, schedule_due, take_slot

log = logging.getLogger("switchboard.webhooks")

RETRY_DELAYS_SECONDS = (5, 300, 1800, 7200, 18000, 36000, 36000)
MAX_ATTEMPTS = len(RETRY_DELAYS_SECONDS) + 1

# The due-work lease of one run (cli/wiring.py): no run outlives it, nor the slot it holds.
LEASE_SECONDS = 120
# Attempts to one subscription (or one agent's post-call webhook) in flight at once (CONTRACT 11a).
RUNS_PER_TARGET = 5
THROTTLED_WAIT_SECONDS = 5.0
THROTTLED_WAIT_MAX_SECONDS = 300.0

SELECT_DELIVERY = """
SELECT d.id, d.subscription_id, d.agent_id, d.message_id, d.body, d.status, d.attempt_count,
       d.next_attempt_at,
       COALESCE(s.url, d.target_url) AS url, COALESCE(s.secret, d.target_secret) AS secret,
       (d.subscription_id IS NULL OR (s.is_active AND s.deleted_at IS NULL)) AS target_active
FROM webhook_deliveries AS d
LEFT JOIN webhook_subscriptions AS s ON s.id = d.subscription_id
WHERE d.id = $1
"""

CANCEL_DELIVERY = """
UPDATE webhook_deliveries SET status = 'cancelled', completed_at = now(), updated_at = now()
WHERE id = $1 AND status = 'pending'
"""

INSERT_ATTEMPT = """
INSERT INTO webhook_attempts (delivery_id, attempt_number, url, status_code, error, duration_ms)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (sub_account_id, delivery_id, attempt_number) DO NOTHING
RETURNING id
"""

UPDATE_DELIVERY = """
UPDATE webhook_deliveries
SET status = $3, attempt_count = $2, next_attempt_at = COALESCE($4, next_attempt_at),
    last_status_code = $5, last_error = $6,
    completed_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END, updated_at = now()
WHERE id = $1 AND status = 'pending' AND attempt_count = $2 - 1
"""

SELECT_STATE = "SELECT status, next_attempt_at FROM webhook_deliveries WHERE id = $1"

# The sub-account's delivery that has waited longest for a slot (due by its own schedule, its
# run put off), the same target's first; locked so that a run claiming it meanwhile is left be.
SELECT_WAITING = """
SELECT d.id FROM control.due_work AS w
JOIN webhook_deliveries AS d ON d.id = w.ref_id
WHERE w.sub_account_id = $1 AND w.kind = $2 AND w.status = 'pending'
  AND w.claimed_until IS NULL AND w.due_at > now()
  AND d.status = 'pending' AND d.next_attempt_at <= now()
ORDER BY (d.subscription_id IS NOT DISTINCT FROM $3::uuid
          AND d.agent_id IS NOT DISTINCT FROM $4::uuid) DESC, d.next_attempt_at, d.id
LIMIT 1
FOR UPDATE OF w SKIP LOCKED
"""


def retry_delay(attempt_number: int, scale: float) -> timedelta:
    """The wait after attempt `attempt_number` (1-based) failed."""
    return timedelta(seconds=RETRY_DELAYS_SECONDS[attempt_number - 1] * scale)


async def deliver_webhook(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    """Make the delivery's next attempt if it is due; return when to try again, if ever."""
    async with tenant_transaction(ctx["db"], work.schema) as conn:
        delivery = await conn.fetchrow(SELECT_DELIVERY, work.ref_id)
        if delivery is None or delivery["status"] != "pending":
            return None
        if not delivery["target_active"]:
            await conn.execute(CANCEL_DELIVERY, work.ref_id)
            return None
    if delivery["next_attempt_at"] > utcnow():
        return delivery["next_attempt_at"]  # type: ignore[no-any-return]
    settings = ctx["settings"]
    groups = run_groups(work, delivery, settings.webhook_sub_account_concurrency)
    token = f"{work.id}:{work.version}"
    if not await take_slot(ctx["redis"], groups, token, LEASE_SECONDS):
        return utcnow() + throttled_wait(work, delivery)
    try:
        secret = secrets.decrypt(delivery["secret"])
        result = await webhooks.post(
            delivery["url"],
            secret,
            delivery["message_id"],
            delivery["body"],
            allow_private=settings.allow_private_webhooks,
            timeout_seconds=settings.webhook_timeout_seconds,
        )
        async with tenant_transaction(ctx["db"], work.schema) as conn:
            return await record_attempt(conn, delivery, result, settings.webhook_retry_scale)
    finally:
        await release(ctx, work, delivery, groups, token)


def run_groups(work: DueWork, delivery: asyncpg.Record, per_sub_account: int) -> list[RunGroup]:
    """The delivery's target and its sub-account, each with the runs it allows at once."""
    if delivery["subscription_id"] is not None:
        target = f"subscription:{delivery['subscription_id']}"
    elif delivery["agent_id"] is not None:
        target = f"agent:{delivery['agent_id']}"
    else:
        target = "url:" + hashlib.sha256(delivery["url"].encode()).hexdigest()[:32]
    prefix = f"switchboard:webhook_runs:{work.sub_account_id}"
    return [RunGroup(f"{prefix}:{target}", RUNS_PER_TARGET), RunGroup(prefix, per_sub_account)]


def throttled_wait(work: DueWork, delivery: asyncpg.Record) -> timedelta:
    """How long a run that found no slot waits unless woken: longer each time it waited."""
    waited = max(work.attempts - 1 - delivery["attempt_count"], 0)
    seconds = min(THROTTLED_WAIT_SECONDS * 2 ** min(waited, 10), THROTTLED_WAIT_MAX_SECONDS)
    return timedelta(seconds=seconds * random.uniform(1.0, 1.2))


async def release(
    ctx: dict[str, Any], work: DueWork, delivery: asyncpg.Record, groups: list[RunGroup], token: str
) -> None:
    """Give the slot back and wake the delivery that has waited longest for one. Neither fails
    the run: a slot not given back expires, a delivery not woken looks again on its own."""
    try:
        await give_back(ctx["redis"], groups, token)
        await wake_waiting(ctx, work, delivery)
    except Exception:
        log.warning("could not hand over the slot of delivery %s", delivery["id"], exc_info=True)


async def wake_waiting(ctx: dict[str, Any], work: DueWork, delivery: asyncpg.Record) -> None:
    async with tenant_transaction(ctx["db"], work.schema) as conn:
        waiting: uuid.UUID | None = await conn.fetchval(
            SELECT_WAITING,
            work.sub_account_id,
            DELIVERY_KIND,
            delivery["subscription_id"],
            delivery["agent_id"],
        )
        if waiting is not None:
            await schedule_due(conn, work.sub_account_id, DELIVERY_KIND, waiting, utcnow())


async def record_attempt(
    conn: asyncpg.Connection, delivery: asyncpg.Record, result: AttemptResult, scale: float
) -> datetime | None:
    number = delivery["attempt_count"] + 1
    status, next_at = _outcome(number, result, scale)
    inserted = await conn.fetchval(
        INSERT_ATTEMPT,
        delivery["id"],
        number,
        delivery["url"],
        result.status_code,
        result.error,
        result.duration_ms,
    )
    updated = (
        inserted is not None
        and await conn.fetchval(
            UPDATE_DELIVERY + " RETURNING id",
            delivery["id"],
            number,
            status,
            next_at,
            result.status_code,
            result.error,
        )
        is not None
    )
    if not updated:
        # Another run recorded this attempt first: follow the state it left.
        state = await conn.fetchrow(SELECT_STATE, delivery["id"])
        return state["next_attempt_at"] if state and state["status"] == "pending" else None
    if result.status_code == 410 and delivery["subscription_id"] is not None:
        await disable_subscription(conn, delivery["subscription_id"], "gone")
    return next_at if status == "pending" else None


def _outcome(number: int, result: AttemptResult, scale: float) -> tuple[str, datetime | None]:
    if result.delivered:
        return "delivered", None
    if result.refused or result.status_code == 410 or number >= MAX_ATTEMPTS:
        return "failed", None
    return "pending", utcnow() + retry_delay(number, scale)
