"""Event log rules: the 30-day feed of emitted events, the delivery log of a subscription or an
agent's post-call webhook, and redelivery (the same event, a new delivery)."""

from __future__ import annotations

import math
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


def invalid(field: str, message: str) -> APIError:
    return APIError(
        400,
        "validation_error",
        message,
        details=[{"field": field, "message": message, "type": "value_error"}],
    )


# The feed: the window ($1), the types ($2), after a timestamp ($3) or after a position ($4).
FEED_FILTER = """
WHERE timestamp > $1 AND ($2::text[] IS NULL OR type = ANY($2)) AND timestamp > COALESCE($3, $1)
  AND position > COALESCE($4::bigint, 0)
"""

SELECT_EVENTS = f"""
SELECT id, type, timestamp, data, count(*) OVER () AS total
FROM events
{FEED_FILTER}
ORDER BY position DESC
LIMIT $5 OFFSET $6
"""

COUNT_EVENTS = f"SELECT count(*) FROM events {FEED_FILTER}"

SELECT_POSITION = "SELECT position FROM events WHERE id = $1"

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
    "webhook subscription",
    "SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = $1)",
    *_log_queries("subscription_id"),
)
AGENT_LOG = DeliveryLog(
    "agent",
    "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND deleted_at IS NULL)",
    *_log_queries("agent_id"),
)

SELECT_DELIVERY = f"SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1"

SELECT_ATTEMPTS = """
SELECT delivery_id, attempted_at AS at, status_code, error, duration_ms FROM webhook_attempts
WHERE delivery_id = ANY($1::uuid[])
ORDER BY delivery_id, attempt_number
"""

# Whether the delivery's target still takes events: a live subscription, or an agent not deleted.
SELECT_FOR_REDELIVERY = """
SELECT d.status, COALESCE(d.original_delivery_id, d.id) AS original_id,
       CASE WHEN d.subscription_id IS NOT NULL THEN s.is_active AND s.deleted_at IS NULL
            WHEN d.agent_id IS NOT NULL THEN a.deleted_at IS NULL
            ELSE true END AS target_active
FROM webhook_deliveries AS d
LEFT JOIN webhook_subscriptions AS s ON s.id = d.subscription_id
LEFT JOIN agents AS a ON a.id = d.agent_id
WHERE d.id = $1
FOR KEY SHARE OF d
"""


# Redeliveries of one original delivery (its redeliveries' too) in any rolling hour.
REDELIVERY_LIMIT = 10
REDELIVERY_WINDOW = timedelta(hours=1)
# One lock per original delivery (which retention may already have deleted), so that concurrent
# redeliveries count one after another.
REDELIVERY_LOCK_SPACE = 0x52444C56  # "RDLV"
LOCK_REDELIVERIES = "SELECT pg_advisory_xact_lock($1, hashtext($2::uuid::text))"
# A statement of its own after the lock, so that it sees what the previous holder committed.
RECENT_REDELIVERIES = """
SELECT count(*) AS count, min(created_at) AS oldest, clock_timestamp() AS now
FROM webhook_deliveries
WHERE original_delivery_id = $1 AND created_at > clock_timestamp() - $2::interval
"""


async def list_events(
    scope: TenantScope,
    types: list[str] | None,
    since: datetime | None,
    after: str | None,
    limit: int,
    offset: int,
) -> tuple[list[dict[str, Any]], int]:
    """Events of the last 30 days, newest first (in commit order, api/events.py); of `types`
    only, and after `since` (a timestamp) or `after` (an event id), if given: 400
    `validation_error` when `after` is not an event of the sub-account."""
    async with scope.transaction() as conn:
        position = None
        if after is not None:
            position = await conn.fetchval(SELECT_POSITION, after)
            if position is None:
                raise invalid("after", "after must be the id of an event of this sub-account")
        window = (utcnow() - RETENTION, types, since, position)
        return await fetch_page(
            conn, SELECT_EVENTS, COUNT_EVENTS, *window, limit, offset, count_args=window
        )


async def list_deliveries(
    scope: TenantScope, log: DeliveryLog, owner_id: uuid.UUID, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of the owner's deliveries, newest first, each with its attempts."""
    async with scope.transaction() as conn:
        if not await conn.fetchval(log.exists, owner_id):
            raise not_found(log.what)
        items, total = await fetch_page(
            conn, log.page, log.count, owner_id, limit, offset, count_args=(owner_id,)
        )
        return await _with_attempts(conn, items), total


async def redeliver(scope: TenantScope, delivery_id: uuid.UUID) -> dict[str, Any]:
    """The delivery's event again, to the same target, as a new delivery sent at once."""
    async with scope.transaction() as conn:
        delivery = await conn.fetchrow(SELECT_FOR_REDELIVERY, delivery_id)
        if delivery is None:
            raise not_found("webhook delivery")
        if delivery["status"] == "pending":
            raise APIError(
                409,
                "delivery_pending",
                "the delivery is still being attempted; redeliver it once it ends",
            )
        if not delivery["target_active"]:
            raise APIError(
                409,
                "delivery_target_inactive",
                "the delivery's subscription or agent no longer takes events",
            )
        await _within_redelivery_limit(conn, delivery["original_id"])
        new_id = await events.emit_again(conn, delivery_id)
        [new] = await _with_attempts(conn, [dict(await conn.fetchrow(SELECT_DELIVERY, new_id))])
    return new


async def _within_redelivery_limit(conn: asyncpg.Connection, original_id: uuid.UUID) -> None:
    """429 `redelivery_limited` (with Retry-After: the seconds until the oldest of the hour's
    redeliveries leaves the hour) when the original delivery already has REDELIVERY_LIMIT
    redeliveries in the last hour. The lock holds until the transaction ends, so concurrent
    requests are counted one after another."""
    await conn.execute(LOCK_REDELIVERIES, REDELIVERY_LOCK_SPACE, original_id)
    recent = await conn.fetchrow(RECENT_REDELIVERIES, original_id, REDELIVERY_WINDOW)
    if recent["count"] < REDELIVERY_LIMIT:
        return
    wait = recent["oldest"] + REDELIVERY_WINDOW - recent["now"]
    raise APIError(
        429,
        "redelivery_limited",
        f"this delivery was redelivered {REDELIVERY_LIMIT} times in the last hour; retry later",
        headers={"Retry-After": str(max(1, math.ceil(wait.total_seconds())))},
    )


async def _with_attempts(
    conn: asyncpg.Connection, items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    rows = await conn.fetch(SELECT_ATTEMPTS, [item["id"] for item in items])
    attempts: dict[uuid.UUID, list[dict[str, Any]]] = {item["id"]: [] for item in items}
    for row in rows:
        attempts[row["delivery_id"]].append(
            {key: row[key] for key in ("at", "status_code", "error", "duration_ms")}
        )
    return [
        {
            "id": item["id"],
            "event_id": item["event_id"],
            "event_type": item["event_type"],
            "status": item["status"],
            "attempts": attempts[item["id"]],
            "next_attempt_at": item["next_attempt_at"],
        }
        for item in items
    ]
