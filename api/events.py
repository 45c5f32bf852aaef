"""Outbound events: store every event and queue its signed, retried deliveries, in the caller's
transaction.

- `emit(conn, event_type, data)`: the event is kept in `events` (GET /events lists it, subscribers
  or not) and gets one delivery per active webhook subscription of the tenant that wants
  `event_type` (or `*`). Returns the event.
- `emit_to(conn, event, url, secret, agent_id=None)`: one more delivery of that event to an
  explicit target that no subscription backs, such as an agent's post-call webhook; `secret` is
  the target's signing secret (`whsec_<base64>`, see `integrations.webhooks.new_secret`).
  Returns the delivery id.
- `emit_again(conn, delivery_id)`: a new delivery of what an earlier one carried (a replay).

All must run inside `tenant_transaction(...)`: the event, the deliveries and their entries in the
durable scheduler commit (or roll back) with the caller's change, and the worker sends them only
after commit. Every delivery carries the Standard Webhooks body `{type, timestamp, data}` and the
event's id as its message id (`webhook-id`, shared by every target, kept across retries and
redeliveries); it is signed, retried on the schedule of CONTRACT.md section 5 and logged per
attempt (api/webhook_subscriptions/tasks.py).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from tenancy import jsonenc, secrets
from tenancy.clock import iso, utcnow
from tenancy.due import schedule_due

EVENT_TYPES = (
    "contact.created", "contact.updated", "contact.deleted", "contact.consent_updated",
    "message.received", "message.status_updated", "call.completed", "call.failed",
    "campaign.completed", "invoice.paid",
)
# A subscription to every event, including ones added to the catalog later.
ALL_EVENTS = "*"
DELIVERY_KIND = "webhook_delivery"

# `data` is taken from the body itself, so the log holds exactly what was sent.
INSERT_EVENT = """
INSERT INTO events (id, type, timestamp, data) VALUES ($1, $2, $3, ($4::text::jsonb) -> 'data')
"""

INSERT_SUBSCRIPTION_DELIVERIES = """
INSERT INTO webhook_deliveries (subscription_id, event_type, message_id, body)
SELECT id, $1, $2, $3 FROM webhook_subscriptions
WHERE is_active AND deleted_at IS NULL AND events && ARRAY[$1::text, '*']
RETURNING id, next_attempt_at
"""

INSERT_TARGET_DELIVERY = """
INSERT INTO webhook_deliveries (target_url, target_secret, agent_id, event_type, message_id, body)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id, next_attempt_at
"""

# The same message (id, body) to the same target, as a delivery of its own.
INSERT_DELIVERY_AGAIN = """
INSERT INTO webhook_deliveries
    (subscription_id, target_url, target_secret, agent_id, event_type, message_id, body)
SELECT subscription_id, target_url, target_secret, agent_id, event_type, message_id, body
FROM webhook_deliveries WHERE id = $1
RETURNING id, next_attempt_at
"""

SELECT_SUB_ACCOUNT = "SELECT id FROM control.sub_accounts WHERE schema_name = current_schema()"


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    timestamp: dt.datetime
    body: str


async def emit(conn: asyncpg.Connection, event_type: str, data: dict[str, Any]) -> Event:
    """Keep the event and queue it for every subscription that wants it (same transaction)."""
    event = new_event(event_type, data)
    await conn.execute(INSERT_EVENT, event.id, event.type, event.timestamp, event.body)
    rows = await conn.fetch(INSERT_SUBSCRIPTION_DELIVERIES, event.type, event.id, event.body)
    await _schedule(conn, rows)
    return event


async def emit_to(conn: asyncpg.Connection, event: Event, url: str, secret: str,
                  agent_id: uuid.UUID | None = None) -> uuid.UUID:
    """Queue one delivery of `event` to `url`, signed with `secret` (same transaction)."""
    row = await conn.fetchrow(INSERT_TARGET_DELIVERY, url, secrets.encrypt(secret), agent_id,
                              event.type, event.id, event.body)
    await _schedule(conn, [row])
    return row["id"]  # type: ignore[no-any-return]


async def emit_again(conn: asyncpg.Connection, delivery_id: uuid.UUID) -> uuid.UUID:
    """Queue a new delivery of what `delivery_id` carried, to its target (same transaction); it
    is signed afresh when sent, with the same message id."""
    row = await conn.fetchrow(INSERT_DELIVERY_AGAIN, delivery_id)
    await _schedule(conn, [row])
    return row["id"]  # type: ignore[no-any-return]


def new_event(event_type: str, data: dict[str, Any], at: dt.datetime | None = None) -> Event:
    """A new event: its id (the message id) and the exact JSON body that is signed and sent."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    at = at or utcnow()
    # To the millisecond, as the body shows it, so that `since=<its timestamp>` excludes it.
    at = at.replace(microsecond=at.microsecond // 1000 * 1000)
    body = jsonenc.dumps({"type": event_type, "timestamp": iso(at), "data": data})
    return Event(f"msg_{uuid.uuid4().hex}", event_type, at, body)


async def _schedule(conn: asyncpg.Connection, rows: list[asyncpg.Record]) -> None:
    if not rows:
        return
    sub_account_id = await conn.fetchval(SELECT_SUB_ACCOUNT)
    if sub_account_id is None:
        raise RuntimeError("emit must run inside a tenant transaction")
    for row in rows:
        await schedule_due(conn, sub_account_id, DELIVERY_KIND, row["id"], row["next_attempt_at"])
