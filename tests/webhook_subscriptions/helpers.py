"""Shared steps of the delivery tests: subscribe, emit, and read what was stored."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from api.events import emit, emit_to
from tenancy.db import tenant_transaction

SUBSCRIPTIONS = "/webhooks/inbound/webhook-subscriptions"
CONTACT_EVENT = {"sub_account_id": None, "contact": {"id": "c1", "tags": ["vip"]},
                 "changes": {"tags": {"added": ["vip"], "removed": []}}}


async def subscribe(client: Any, tenant: Any, url: str,
                    events: list[str] | None = None) -> dict[str, Any]:
    response = await client.post(SUBSCRIPTIONS, json={"url": url,
                                                      "events": events or ["contact.updated"]},
                                 headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["subscription"]  # type: ignore[no-any-return]


async def emit_event(pool: asyncpg.Pool, tenant: Any, event_type: str = "contact.updated",
                     data: dict[str, Any] | None = None) -> None:
    async with tenant_transaction(pool, tenant.schema) as conn:
        await emit(conn, event_type, data or {**CONTACT_EVENT, "sub_account_id": tenant.id})


async def emit_target(pool: asyncpg.Pool, tenant: Any, url: str, secret: str,
                      data: dict[str, Any]) -> uuid.UUID:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await emit_to(conn, url, secret, "call.completed", data)


async def deliveries(pool: asyncpg.Pool, tenant: Any) -> list[dict[str, Any]]:
    async with tenant_transaction(pool, tenant.schema) as conn:
        rows = await conn.fetch(
            "SELECT id, subscription_id, event_type, message_id, status, attempt_count,"
            " last_status_code, last_error FROM webhook_deliveries ORDER BY created_at, id")
    return [dict(row) for row in rows]


async def attempts(pool: asyncpg.Pool, tenant: Any, delivery_id: uuid.UUID) -> list[dict[str, Any]]:
    async with tenant_transaction(pool, tenant.schema) as conn:
        rows = await conn.fetch(
            "SELECT attempt_number, status_code, error, duration_ms FROM webhook_attempts"
            " WHERE delivery_id = $1 ORDER BY attempt_number", delivery_id)
    return [dict(row) for row in rows]


async def due_rows(pool: asyncpg.Pool, ref_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    rows = await pool.fetch("SELECT id, kind, ref_id, version, due_at, last_error"
                            " FROM control.due_work WHERE ref_id = ANY($1::uuid[])", ref_ids)
    return [dict(row) for row in rows]


async def next_attempt_delay(pool: asyncpg.Pool, tenant: Any, delivery_id: uuid.UUID) -> float:
    """Seconds between the delivery's last recorded attempt and its next one."""
    async with tenant_transaction(pool, tenant.schema) as conn:
        return float(await conn.fetchval(
            "SELECT extract(epoch FROM d.next_attempt_at - max(a.attempted_at))"
            " FROM webhook_deliveries AS d JOIN webhook_attempts AS a ON a.delivery_id = d.id"
            " WHERE d.id = $1 GROUP BY d.next_attempt_at", delivery_id))
