"""Redelivery limit (issue 23, CONTRACT 11, 11a): at most 10 redeliveries per original delivery
(its redeliveries included) in any rolling hour; the 11th is 429 `redelivery_limited` with
Retry-After, under concurrent requests too."""

from __future__ import annotations

import asyncio
import uuid

from tests.factories import emit_event, subscribe
from tests.helpers import expect_error, tenant_sql

BASE = "/webhooks/inbound"
LIMIT = 10


def redeliver_path(delivery_id):
    return f"{BASE}/webhook-deliveries/{delivery_id}/redeliver"


async def finish_all(pool, tenant):
    """Every delivery ends delivered (no worker runs here: nothing is sent)."""
    await tenant_sql(
        pool,
        tenant,
        "UPDATE webhook_deliveries SET status = 'delivered', "
        "completed_at = now() WHERE status = 'pending'",
    )


async def finished_delivery(client, pool, tenant, receiver):
    await subscribe(client, tenant, receiver.url())
    await emit_event(pool, tenant)
    await finish_all(pool, tenant)
    [row] = await tenant_sql(pool, tenant, "SELECT id FROM webhook_deliveries")
    return row["id"]


async def redeliver(client, tenant, delivery_id):
    return await client.post(redeliver_path(delivery_id), headers=tenant.headers)


async def test_eleventh_redelivery_in_an_hour_is_429_with_retry_after(
    client, pool, tenant, receiver
):
    original = await finished_delivery(client, pool, tenant, receiver)
    for _ in range(LIMIT):
        response = await redeliver(client, tenant, original)
        assert response.status_code == 202, await response.get_data(as_text=True)

    response = await redeliver(client, tenant, original)

    body = await expect_error(response, 429, "redelivery_limited")
    assert body["status"] == "error" and body["error"]["message"]
    assert 3500 <= int(response.headers["Retry-After"]) <= 3600
    rows = await tenant_sql(
        pool, tenant, "SELECT original_delivery_id FROM webhook_deliveries WHERE id <> $1", original
    )
    assert [row["original_delivery_id"] for row in rows] == [original] * LIMIT


async def test_redeliveries_of_redeliveries_count_against_the_original(
    client, pool, tenant, receiver
):
    original = await finished_delivery(client, pool, tenant, receiver)
    first = (await (await redeliver(client, tenant, original)).get_json())["delivery"]["id"]
    await finish_all(pool, tenant)
    for _ in range(LIMIT - 2):
        assert (await redeliver(client, tenant, first)).status_code == 202
    await finish_all(pool, tenant)
    [later] = await tenant_sql(
        pool,
        tenant,
        "SELECT id FROM webhook_deliveries WHERE id NOT IN ($1, $2) LIMIT 1",
        original,
        uuid.UUID(first),
    )
    assert (await redeliver(client, tenant, later["id"])).status_code == 202

    for delivery_id in (original, first, later["id"]):
        await expect_error(await redeliver(client, tenant, delivery_id), 429, "redelivery_limited")
    originals = await tenant_sql(
        pool,
        tenant,
        "SELECT DISTINCT original_delivery_id FROM webhook_deliveries WHERE id <> $1",
        original,
    )
    assert [row["original_delivery_id"] for row in originals] == [original]


async def test_concurrent_redeliveries_stop_at_the_limit(client, pool, tenant, receiver):
    original = await finished_delivery(client, pool, tenant, receiver)

    responses = await asyncio.gather(
        *(redeliver(client, tenant, original) for _ in range(LIMIT + 2))
    )

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [202] * LIMIT + [429] * 2
    for response in responses:
        if response.status_code == 429:
            await expect_error(response, 429, "redelivery_limited")
    [count] = await tenant_sql(
        pool,
        tenant,
        "SELECT count(*) FROM webhook_deliveries WHERE original_delivery_id = $1",
        original,
    )
    assert count["count"] == LIMIT


async def test_the_hour_rolls(client, pool, tenant, receiver):
    original = await finished_delivery(client, pool, tenant, receiver)
    for _ in range(LIMIT):
        assert (await redeliver(client, tenant, original)).status_code == 202
    # The oldest redelivery is 59 minutes old: it leaves the hour in about a minute.
    await tenant_sql(
        pool,
        tenant,
        """
        UPDATE webhook_deliveries SET created_at = now() - interval '59 minutes'
        WHERE id = (SELECT id FROM webhook_deliveries WHERE original_delivery_id = $1
                    ORDER BY created_at, id LIMIT 1)""",
        original,
    )
    response = await redeliver(client, tenant, original)
    await expect_error(response, 429, "redelivery_limited")
    assert 1 <= int(response.headers["Retry-After"]) <= 61

    await tenant_sql(
        pool,
        tenant,
        "UPDATE webhook_deliveries SET created_at = created_at - "
        "interval '2 minutes' WHERE original_delivery_id = $1 "
        "AND created_at < now() - interval '30 minutes'",
        original,
    )
    assert (await redeliver(client, tenant, original)).status_code == 202
    await expect_error(await redeliver(client, tenant, original), 429, "redelivery_limited")


async def test_the_limit_is_per_original_delivery(client, pool, tenant, receiver):
    original = await finished_delivery(client, pool, tenant, receiver)
    for _ in range(LIMIT):
        assert (await redeliver(client, tenant, original)).status_code == 202
    await emit_event(pool, tenant)
    await finish_all(pool, tenant)
    [other] = await tenant_sql(
        pool,
        tenant,
        "SELECT id FROM webhook_deliveries WHERE original_delivery_id IS NULL AND id <> $1",
        original,
    )
    assert (await redeliver(client, tenant, other["id"])).status_code == 202


async def test_refused_redeliveries_do_not_count(client, pool, tenant, receiver):
    original = await finished_delivery(client, pool, tenant, receiver)
    first = (await (await redeliver(client, tenant, original)).get_json())["delivery"]["id"]
    for _ in range(LIMIT + 2):
        # Still pending: 409, and not one of the hour's redeliveries.
        await expect_error(await redeliver(client, tenant, first), 409, "delivery_pending")
    for _ in range(LIMIT - 1):
        assert (await redeliver(client, tenant, original)).status_code == 202
