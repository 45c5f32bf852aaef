"""Outbound events: store every event and queue its signed, retried deliveries, in the caller's
transaction.

- `emit(conn, event_type, data)`: the event is kept in `events` (GET /events lists it, subscribers
  or not) and gets one delivery per active webhook subscription of the tenant that wants
  `event_type` (or `*`). Returns the event.
- `emit_to(conn, event, url, secret, agent_id=None)`: one more delivery of that event to an
  explicit target that no subscription backs, such as an agent's post-call webhook; `secret` is
  the target's signing secret (`whsec_<base64>`, see `integrations.webhooks.new_secret`).
  Returns the delivery id.
- `emit_again(conn, delivery_id)`: a new delivery of what an earlier one carried (a replay); it
  counts against the first delivery of that message to that target (`original_delivery_id`).

All must run inside `tenant_transaction(...)`: the event, the deliveries and their entries in the
durable scheduler commit (or roll back) with the caller's change, and the worker sends them only
after commit. Every delivery carries the Standard Webhooks body `{type, timestamp, data}` and the
event's id as its message id (`webhook-id`, shared by every target, kept across retries and
redeliveries); it is signed, retried on the schedule of CONTRACT.md section 5 and logged per
attempt (api/webhook_subscriptions/tasks.py).

The event stream is in commit order (CONTRACT 11, GET /events): `emit` takes the tenant's
event-stream lock (a transaction-level advisory lock, so it holds behind PgBouncer in transaction
mode) and only then stamps the event: its `position` (an identity column) and its `timestamp`
(the database clock to the millisecond, and always at least 1 ms past the newest event kept, so
timestamps never repeat or go back). The lock is held until the transaction ends, so events are
stamped in the order their transactions commit: a client that has seen an event has seen every
event stamped before it. The lock serialises the rest of every emitting transaction of the
tenant, so **emit must be the last step of its transaction that takes a lock** (a row lock, an
insert that may wait on a unique key, another advisory lock): a transaction that emits and then
waits for a lock held by another transaction that is waiting to emit deadlocks. Emitting several
events in one transaction is fine (the lock is re-entrant); reads and inserts of new rows after
emit are fine. Under a sustained burst of more than 1000 events a second in one sub-account,
timestamps run ahead of the clock by up to the burst's excess.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from tenancy import jsonenc, secrets
from tenancy.clock import iso
from tenancy.due import schedule_due

EVENT_TYPES = (
    "contact.created",
    "contact.updated",
    "contact.deleted",
    "contact.consent_updated",
    "message.received",
    "message.status_updated",
    "call.completed",
    "call.failed",
    "campaign.completed",
    "invoice.paid",
    "appointment.booked",
    "appointment.rescheduled",
    "appointment.cancelled",
    "call.analyzed",
)
# A subscription to every event, including ones added to the catalog later.
ALL_EVENTS = "*"
DELIVERY_KIND = "webhook_delivery"

# Two int4 keys: one namespace for event streams, one key per tenant schema (a hash collision
# between two tenants only makes them wait for each other).
STREAM_LOCK_SPACE = 0x45564E54  # "EVNT"
LOCK_STREAM = "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))"

# A statement of its own after LOCK_STREAM, so that its snapshot sees the event the previous
# holder of the lock committed. `data` is the JSON the body carries, so the log holds exactly
# what was sent.
INSERT_EVENT = """
INSERT INTO events (id, type, timestamp, data)
SELECT $1, $2,
       greatest(date_trunc('milliseconds', clock_timestamp()),
                (SELECT max(timestamp) + interval '1 millisecond' FROM events)),
       $3::text::jsonb
RETURNING timestamp
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

# The same message (id, body) to the same target, as a delivery of its own that counts against
# the original (the first delivery of the message to the target).
INSERT_DELIVERY_AGAIN = """
INSERT INTO webhook_deliveries
    (subscription_id, target_url, target_secret, agent_id, event_type, message_id, body,
     original_delivery_id)
SELECT subscription_id, target_url, target_secret, agent_id, event_type, message_id, body,
       COALESCE(original_delivery_id, id)
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
    """Keep the event and queue it for every subscription that wants it (same transaction).

    Takes the tenant's event-stream lock until the transaction ends: the caller takes no lock
    after this (module doc)."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    event_id = f"msg_{uuid.uuid4().hex}"
    data_json = jsonenc.dumps(data)
    await conn.execute(LOCK_STREAM, STREAM_LOCK_SPACE)
    at = await conn.fetchval(INSERT_EVENT, event_id, event_type, data_json)
    event = Event(event_id, event_type, at, _body(event_type, at, data_json))
    rows = await conn.fetch(INSERT_SUBSCRIPTION_DELIVERIES, event.type, event.id, event.body)
    await _schedule(conn, rows)
    return event


async def emit_to(
    conn: asyncpg.Connection, event: Event, url: str, secret: str, agent_id: uuid.UUID | None = None
) -> uuid.UUID:
    """Queue one delivery of `event` to `url`, signed with `secret` (same transaction)."""
    row = await conn.fetchrow(
        INSERT_TARGET_DELIVERY,
        url,
        secrets.encrypt(secret),
        agent_id,
        event.type,
        event.id,
        event.body,
    )
    await _schedule(conn, [row])
    return row["id"]  # type: ignore[no-any-return]


async def emit_again(conn: asyncpg.Connection, delivery_id: uuid.UUID) -> uuid.UUID:
    """Queue a new delivery of what `delivery_id` carried, to its target (same transaction); it
    is signed afresh when sent, with the same message id."""
    row = await conn.fetchrow(INSERT_DELIVERY_AGAIN, delivery_id)
    await _schedule(conn, [row])
    return row["id"]  # type: ignore[no-any-return]


def _body(event_type: str, at: dt.datetime, data_json: str) -> str:
    """The exact JSON body that is signed and sent: `{type, timestamp, data}`, compact, as
    `jsonenc.dumps` writes it, around the very `data` text the log keeps."""
    return (
        f'{{"type":{jsonenc.dumps(event_type)},"timestamp":{jsonenc.dumps(iso(at))},'
        f'"data":{data_json}}}'
    )


async def _schedule(conn: asyncpg.Connection, rows: list[asyncpg.Record]) -> None:
    if not rows:
        return
    sub_account_id = await conn.fetchval(SELECT_SUB_ACCOUNT)
    if sub_account_id is None:
        raise RuntimeError("emit must run inside a tenant transaction")
    for row in rows:
        await schedule_due(conn, sub_account_id, DELIVERY_KIND, row["id"], row["next_attempt_at"])
