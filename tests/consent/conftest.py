"""Fixtures of the consent tests: a tenant subscribed to consent events, and those events."""

from __future__ import annotations

import json

import pytest

from tests.factories import SUBSCRIPTIONS
from tests.helpers import tenant_sql


async def consent_events(pool, tenant):
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT body FROM webhook_deliveries "
        "WHERE event_type = 'contact.consent_updated' "
        "ORDER BY created_at, id",
    )
    return [json.loads(row["body"])["data"] for row in rows]


@pytest.fixture
async def subscribed(client, pool, tenant, receiver):
    """tenant, subscribed to consent events; undelivered ones are cancelled afterwards."""
    response = await client.post(
        SUBSCRIPTIONS,
        headers=tenant.headers,
        json={"url": receiver.url(), "events": ["contact.consent_updated"]},
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    yield tenant
    await tenant_sql(
        pool,
        tenant,
        "UPDATE webhook_deliveries SET status = 'cancelled', "
        "completed_at = now() WHERE status = 'pending'",
    )
