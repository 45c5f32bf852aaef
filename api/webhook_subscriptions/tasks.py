"""Webhook delivery: one signed attempt per run of a `webhook_delivery` due-work row.

Attempts: at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, each delay times
`SWITCHBOARD_WEBHOOK_RETRY_SCALE`. A 2xx delivers; 410 Gone disables the subscription; a target
refused by the SSRF guard (a non-public address) fails at once; timeouts
(`SWITCHBOARD_WEBHOOK_TIMEOUT_SECONDS`), names that do not resolve, network errors and other
statuses retry.
Every attempt is recorded in `webhook_attempts`; the delivery row holds the outcome.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg

from api.webhook_subscriptions.service import disable_subscription
from integrations import webhooks
from integrations.webhooks import AttemptResult
from tenancy import secrets
from tenancy.clock import utcnow
from tenancy.db import tenant_transaction
from tenancy.due import DueWork

RETRY_DELAYS_SECONDS = (5, 300, 1800, 7200, 18000, 36000, 36000)
MAX_ATTEMPTS = len(RETRY_DELAYS_SECONDS) + 1

SELECT_DELIVERY = """
SELECT d.id, d.subscription_id, d.message_id, d.body, d.status, d.attempt_count,
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
ON CONFLICT (delivery_id, attempt_number) DO NOTHING
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
    secret = secrets.decrypt(delivery["secret"])
    result = await webhooks.post(delivery["url"], secret, delivery["message_id"],
                                 delivery["body"], allow_private=settings.allow_private_webhooks,
                                 timeout_seconds=settings.webhook_timeout_seconds)
    async with tenant_transaction(ctx["db"], work.schema) as conn:
        return await record_attempt(conn, delivery, result, settings.webhook_retry_scale)


async def record_attempt(conn: asyncpg.Connection, delivery: asyncpg.Record,
                         result: AttemptResult, scale: float) -> datetime | None:
    number = delivery["attempt_count"] + 1
    status, next_at = _outcome(number, result, scale)
    inserted = await conn.fetchval(INSERT_ATTEMPT, delivery["id"], number, delivery["url"],
                                   result.status_code, result.error, result.duration_ms)
    updated = inserted is not None and await conn.fetchval(
        UPDATE_DELIVERY + " RETURNING id", delivery["id"], number, status, next_at,
        result.status_code, result.error) is not None
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
