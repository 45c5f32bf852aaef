"""Outbound events: record an event for signed, retried delivery, in the caller's transaction.

- `emit(conn, event_type, data)`: one delivery per active webhook subscription of the tenant
  that wants `event_type` (none when nobody subscribed).
- `emit_to(conn, url, secret, event_type, data)`: one delivery to an explicit target that no
  subscription backs, such as an agent's post-call webhook (`call.completed`); `secret` is the
  target's signing secret (`whsec_<base64>`, see `integrations.webhooks.new_secret`). Returns
  the delivery id.

Both must run inside `tenant_transaction(...)`: the deliveries and their entries in the durable
scheduler commit (or roll back) with the caller's change, and the worker sends them only after
commit. Every delivery carries the Standard Webhooks body `{type, timestamp, data}` and one
message id (`webhook-id`, shared by every target of one event, kept across retries); it is
signed, retried on the schedule of CONTRACT.md section 5 and logged per attempt (jobs/delivery.py).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import asyncpg

from tenancy import jsonenc, secrets
from tenancy.clock import iso, utcnow
from tenancy.due import schedule_due

EVENT_TYPES = ("contact.updated", "contact.consent_updated", "call.completed", "call.failed")
DELIVERY_KIND = "webhook_delivery"

INSERT_SUBSCRIPTION_DELIVERIES = """
INSERT INTO webhook_deliveries (subscription_id, event_type, message_id, body)
SELECT id, $1, $2, $3 FROM webhook_subscriptions
WHERE is_active AND deleted_at IS NULL AND events @> ARRAY[$1::text]
RETURNING id, next_attempt_at
"""

INSERT_TARGET_DELIVERY = """
INSERT INTO webhook_deliveries (target_url, target_secret, event_type, message_id, body)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, next_attempt_at
"""

SELECT_SUB_ACCOUNT = "SELECT id FROM control.sub_accounts WHERE schema_name = current_schema()"


async def emit(conn: asyncpg.Connection, event_type: str, data: dict[str, Any]) -> None:
    """Queue `event_type` with `data` for every subscription that wants it (same transaction)."""
    message_id, body = event_message(event_type, data)
    rows = await conn.fetch(INSERT_SUBSCRIPTION_DELIVERIES, event_type, message_id, body)
    await _schedule(conn, rows)


async def emit_to(conn: asyncpg.Connection, url: str, secret: str, event_type: str,
                  data: dict[str, Any]) -> uuid.UUID:
    """Queue one delivery of `event_type` to `url`, signed with `secret` (same transaction)."""
    message_id, body = event_message(event_type, data)
    row = await conn.fetchrow(INSERT_TARGET_DELIVERY, url, secrets.encrypt(secret), event_type,
                              message_id, body)
    await _schedule(conn, [row])
    return row["id"]  # type: ignore[no-any-return]


def event_message(event_type: str, data: dict[str, Any],
                  at: dt.datetime | None = None) -> tuple[str, str]:
    """A new message id and the exact JSON body that is signed and sent."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    payload = {"type": event_type, "timestamp": iso(at or utcnow()), "data": data}
    body = jsonenc.dumps(payload)
    return f"msg_{uuid.uuid4().hex}", body


async def _schedule(conn: asyncpg.Connection, rows: list[asyncpg.Record]) -> None:
    if not rows:
        return
    sub_account_id = await conn.fetchval(SELECT_SUB_ACCOUNT)
    if sub_account_id is None:
        raise RuntimeError("emit must run inside a tenant transaction")
    for row in rows:
        await schedule_due(conn, sub_account_id, DELIVERY_KIND, row["id"], row["next_attempt_at"])
