"""Webhook subscriptions of a sub-account: create, list, delete, and disabling on 410 Gone."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from api.events import DELIVERY_KIND
from integrations.webhooks import new_secret
from tenancy import secrets
from tenancy.db import fetch_page
from tenancy.due import cancel_due_many
from tenancy.errors import not_found
from tenancy.scope import TenantScope

COLUMNS = "id, url, events, secret, is_active, disabled_reason, created_at"

INSERT_SUBSCRIPTION = f"""
INSERT INTO webhook_subscriptions (url, events, secret)
VALUES ($1, $2, $3)
RETURNING {COLUMNS}
"""

SELECT_SUBSCRIPTIONS = f"""
SELECT {COLUMNS}, count(*) OVER () AS total
FROM webhook_subscriptions
WHERE deleted_at IS NULL
ORDER BY created_at DESC, id DESC
LIMIT $1 OFFSET $2
"""

COUNT_SUBSCRIPTIONS = "SELECT count(*) FROM webhook_subscriptions WHERE deleted_at IS NULL"

DELETE_SUBSCRIPTION = """
UPDATE webhook_subscriptions
SET deleted_at = now(), is_active = false, updated_at = now()
WHERE id = $1 AND deleted_at IS NULL
RETURNING id
"""

DISABLE_SUBSCRIPTION = """
UPDATE webhook_subscriptions
SET is_active = false, disabled_at = now(), disabled_reason = $2, updated_at = now()
WHERE id = $1 AND is_active
RETURNING id
"""

CANCEL_PENDING = """
UPDATE webhook_deliveries
SET status = 'cancelled', completed_at = now(), updated_at = now()
WHERE subscription_id = $1 AND status = 'pending'
RETURNING id
"""


async def create_subscription(scope: TenantScope, url: str, events: list[str]) -> dict[str, Any]:
    secret = new_secret()
    async with scope.transaction() as conn:
        row = await conn.fetchrow(INSERT_SUBSCRIPTION, url, events, secrets.encrypt(secret))
    return {**row, "secret": secret}


async def list_subscriptions(
    scope: TenantScope, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    async with scope.transaction() as conn:
        items, total = await fetch_page(
            conn, SELECT_SUBSCRIPTIONS, COUNT_SUBSCRIPTIONS, limit, offset
        )
    items = [{key: value for key, value in item.items() if key != "secret"} for item in items]
    return items, total


async def delete_subscription(scope: TenantScope, subscription_id: uuid.UUID) -> None:
    """Soft-delete: it stops receiving events at once, its pending deliveries are cancelled."""
    async with scope.transaction() as conn:
        if await conn.fetchval(DELETE_SUBSCRIPTION, subscription_id) is None:
            raise not_found("webhook subscription")
        await cancel_pending_deliveries(conn, subscription_id)


async def disable_subscription(
    conn: asyncpg.Connection, subscription_id: uuid.UUID, reason: str
) -> None:
    """Stop sending to a subscription (its receiver answered 410 Gone)."""
    if await conn.fetchval(DISABLE_SUBSCRIPTION, subscription_id, reason) is not None:
        await cancel_pending_deliveries(conn, subscription_id)


async def cancel_pending_deliveries(conn: asyncpg.Connection, subscription_id: uuid.UUID) -> None:
    rows = await conn.fetch(CANCEL_PENDING, subscription_id)
    await cancel_due_many(conn, DELIVERY_KIND, [row["id"] for row in rows])
