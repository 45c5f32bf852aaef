"""Event log rules: the 30-day feed of emitted events, the delivery log of a subscription or an
agent's post-call webhook, and redelivery (the same event, a new delivery)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from api import events
from tenancy.clock import utcnow
from tenancy.db import fetch_page
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

RETENTION = timedelta(days=30)

SELECT_EVENTS = """
SELECT id, type, timestamp, data, count(*) OVER () AS total
FROM events
WHERE timestamp > $1 AND ($2::text[] IS NULL OR type = ANY($2)) AND timestamp > COALESCE($3, $1)
ORDER BY timestamp DESC, id DESC
LIMIT $4 OFFSET $5
"""

COUNT_EVENTS = """
SELECT count(*) FROM events
WHERE timestamp > $1 AND ($2::text[] IS NULL OR type = ANY($2)) AND timestamp > COALESCE($3, $1)
"""

DELIVERY_COLUMNS = """id, message_id AS event_id, event_type, status,
CASE WHEN status = 'pending' THEN next_attempt_at END AS next_attempt_at"""



def _log_queries(owner_column: str) -> tuple[str, str]:
    """The page and count of one delivery log: the deliveries whose `owner_column` is $1."""
    page = f"""
SELECT {DELIVERY_COLUMNS}, count(*) OVER () AS total FROM webhook_deliveries
WHERE {owner_column} = $1
ORDER BY created_at DESC, id DESC
LIMIT $2 OFFSET $3
"""
    return page, f"SELECT count(*) FROM webhook_deliveries WHERE {owner_column} = $1"


@dataclass(frozen=True)
class DeliveryLog:
    """Whose deliveries: a subscription's (deleted ones included), or an agent's (not deleted)."""

    what: str
    exists: str
    page: str
    count: str


SUBSCRIPTION_LOG = DeliveryLog(
    "webhook subscription", "SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = $1)",
    *_log_queries("subscription_id"))
AGENT_LOG = DeliveryLog(
    "agent", "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND deleted_at IS NULL)",
    *_log_queries("agent_id"))

SELECT_DELIVERY = f"SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1"

SELECT_ATTEMPTS = """
SELECT delivery_id, attempted_at AS at, status_code, error, duration_ms FROM webhook_attempts
WHERE delivery_id = ANY($1::uuid[])
ORDER BY delivery_id, attempt_number
"""

# Whether the delivery's target still takes events: a live subscription, or an agent not deleted.
SELECT_FOR_REDELIVERY = """
SELECT d.status,
       CASE WHEN d.subscription_id IS NOT NULL THEN s.is_active AND s.deleted_at IS NULL
            WHEN d.agent_id IS NOT NULL THEN a.deleted_at IS NULL
            ELSE true END AS target_active
FROM webhook_deliveries AS d
LEFT JOIN webhook_subscriptions AS s ON s.id = d.subscription_id
LEFT JOIN agents AS a ON a.id = d.agent_id
WHERE d.id = $1
FOR KEY SHARE OF d
"""


async def list_events(scope: TenantScope, types: list[str] | None, since: datetime | None,
                      limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Events of the last 30 days, newest first; of `types` only, and after `since`, if given."""
    window = (utcnow() - RETENTION, types, since)
    async with scope.transaction() as conn:
        return await fetch_page(conn, SELECT_EVENTS, COUNT_EVENTS, *window, limit, offset,
                                count_args=window)


async def list_deliveries(scope: TenantScope, log: DeliveryLog, owner_id: uuid.UUID,
                          limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """A page of the owner's deliveries, newest first, each with its attempts."""
    async with scope.transaction() as conn:
        if not await conn.fetchval(log.exists, owner_id):
            raise not_found(log.what)
        items, total = await fetch_page(conn, log.page, log.count, owner_id, limit, offset,
                                        count_args=(owner_id,))
        return await _with_attempts(conn, items), total


async def redeliver(scope: TenantScope, delivery_id: uuid.UUID) -> dict[str, Any]:
    """The delivery's event again, to the same target, as a new delivery sent at once."""
    async with scope.transaction() as conn:
        delivery = await conn.fetchrow(SELECT_FOR_REDELIVERY, delivery_id)
        if delivery is None:
            raise not_found("webhook delivery")
        if delivery["status"] == "pending":
            raise APIError(409, "delivery_pending",
                           "the delivery is still being attempted; redeliver it once it ends")
        if not delivery["target_active"]:
            raise APIError(409, "delivery_target_inactive",
                           "the delivery's subscription or agent no longer takes events")
        new_id = await events.emit_again(conn, delivery_id)
        [new] = await _with_attempts(conn, [dict(await conn.fetchrow(SELECT_DELIVERY, new_id))])
    return new


async def _with_attempts(conn: asyncpg.Connection,
                         items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = await conn.fetch(SELECT_ATTEMPTS, [item["id"] for item in items])
    attempts: dict[uuid.UUID, list[dict[str, Any]]] = {item["id"]: [] for item in items}
    for row in rows:
        attempts[row["delivery_id"]].append(
            {key: row[key] for key in ("at", "status_code", "error", "duration_ms")})
    return [{"id": item["id"], "event_id": item["event_id"], "event_type": item["event_type"],
             "status": item["status"], "attempts": attempts[item["id"]],
             "next_attempt_at": item["next_attempt_at"]} for item in items]
