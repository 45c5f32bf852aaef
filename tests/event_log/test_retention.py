"""Retention: events and finished deliveries past 30 days are deleted by the worker's periodic
job, tenant by tenant, in small batches; recent ones and pending deliveries stay."""

from __future__ import annotations

from arq import create_pool as create_arq_pool
from arq.connections import RedisSettings

from api.event_log import tasks
from tests.factories import emit_event, subscribe
from tests.helpers import attempts, deliveries, stored_events, tenant_sql


async def age(pool, tenant, days, where="TRUE"):
    """Move matching events and deliveries `days` into the past (deliveries finished then)."""
    await tenant_sql(
        pool, tenant, f"UPDATE events SET timestamp = now() - interval '{days} days' WHERE {where}"
    )
    await tenant_sql(
        pool,
        tenant,
        "UPDATE webhook_deliveries SET completed_at = now() - "
        f"interval '{days} days' WHERE status <> 'pending'",
    )


async def purge(pool, tenant):
    return await tasks.purge_old_events({"db": pool}, [str(tenant.id)])


async def some_events(client, pool, tenant, count):
    await subscribe(client, tenant, "https://example.com/hook")
    for _ in range(count):
        await emit_event(pool, tenant)


async def test_old_events_and_finished_deliveries_go_recent_ones_stay(
    client, pool, tenant, tenant_second
):
    await some_events(client, pool, tenant, 3)
    await tenant_sql(
        pool, tenant, "UPDATE webhook_deliveries SET status = 'delivered', completed_at = now()"
    )
    old_delivery = (await deliveries(pool, tenant))[0]["id"]
    await tenant_sql(
        pool,
        tenant,
        "INSERT INTO webhook_attempts (delivery_id, attempt_number, "
        "url, status_code, duration_ms) VALUES ($1, 1, 'x', 200, 1)",
        old_delivery,
    )
    [old, *recent] = await stored_events(pool, tenant)
    await tenant_sql(
        pool,
        tenant,
        "UPDATE events SET timestamp = now() - interval '31 days' WHERE id = $1",
        old["id"],
    )
    await tenant_sql(
        pool,
        tenant,
        "UPDATE webhook_deliveries SET completed_at = now() - interval '31 days' WHERE id = $1",
        old_delivery,
    )
    await some_events(client, pool, tenant_second, 1)
    await age(pool, tenant_second, 29)

    assert await tasks.purge_old_events({"db": pool}, [str(tenant.id), str(tenant_second.id)]) == 2

    assert [event["id"] for event in await stored_events(pool, tenant)] == [
        event["id"] for event in recent
    ]
    assert old_delivery not in [row["id"] for row in await deliveries(pool, tenant)]
    assert len(await deliveries(pool, tenant)) == 2
    assert await attempts(pool, tenant, old_delivery) == []
    assert len(await stored_events(pool, tenant_second)) == 1
    assert len(await deliveries(pool, tenant_second)) == 1


async def test_pending_deliveries_are_kept_however_old(client, pool, tenant):
    await some_events(client, pool, tenant, 1)
    await tenant_sql(
        pool, tenant, "UPDATE webhook_deliveries SET created_at = now() - interval '40 days'"
    )
    await age(pool, tenant, 40)
    await purge(pool, tenant)
    assert await stored_events(pool, tenant) == []
    assert [row["status"] for row in await deliveries(pool, tenant)] == ["pending"]


async def test_a_backlog_goes_in_small_batches_a_few_per_run(client, pool, tenant, monkeypatch):
    await some_events(client, pool, tenant, 7)
    await tenant_sql(
        pool, tenant, "UPDATE webhook_deliveries SET status = 'failed', completed_at = now()"
    )
    await age(pool, tenant, 45)
    monkeypatch.setattr(tasks, "BATCH", 2)
    monkeypatch.setattr(tasks, "MAX_BATCHES", 2)
    assert await purge(pool, tenant) == 8
    assert (len(await stored_events(pool, tenant)), len(await deliveries(pool, tenant))) == (3, 3)
    assert await purge(pool, tenant) == 6
    assert await purge(pool, tenant) == 0
    assert await stored_events(pool, tenant) == []
    assert await deliveries(pool, tenant) == []


async def test_the_worker_runs_the_retention_job(servers, client, pool, tenant, run_worker):
    await some_events(client, pool, tenant, 1)
    await tenant_sql(pool, tenant, "UPDATE webhook_deliveries SET status = 'delivered'")
    await age(pool, tenant, 31)
    arq = await create_arq_pool(RedisSettings.from_dsn(servers.redis_url))
    try:
        job = await arq.enqueue_job("purge_old_events", [str(tenant.id)])
        await run_worker()
        assert await job.result(timeout=5) >= 1
    finally:
        await arq.aclose()
    assert await stored_events(pool, tenant) == []
    assert await deliveries(pool, tenant) == []
