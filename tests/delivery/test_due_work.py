"""The durable scheduler: PostgreSQL keeps the intent, the queue only runs it."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from jobs import due
from tenancy.clock import utcnow
from tenancy.db import tenant_transaction

from .helpers import deliveries, due_rows, emit_event, subscribe

RECORD_KIND = "test.record"
FAIL_KIND = "test.fail"
handled: list[uuid.UUID] = []


@due.register(RECORD_KIND, lease_seconds=30)
async def record(ctx, work):
    handled.append(work.ref_id)
    return None


@due.register(FAIL_KIND, lease_seconds=30)
async def fail(ctx, work):
    raise RuntimeError("handler broke")


RESCHEDULE_KIND = "test.rescheduled_while_running"


@due.register(RESCHEDULE_KIND, lease_seconds=30)
async def rescheduled_while_running(ctx, work):
    handled.append(work.ref_id)
    if handled.count(work.ref_id) == 1:
        # What a route rescheduling the same work meanwhile looks like.
        async with tenant_transaction(ctx["db"], work.schema) as conn:
            await due.schedule_due(conn, work.sub_account_id, work.kind, work.ref_id, utcnow())
    return None


@pytest.fixture
def arq(app):
    return app.app.config["ARQ"]


async def queued(arq, job_id: str) -> bool:
    return await arq.exists(f"arq:job:{job_id}") == 1


async def forget_queue(arq, job_ids) -> None:
    """What Redis losing its data looks like to us: the queued jobs are gone."""
    for job_id in job_ids:
        await arq.zrem("arq:queue", job_id)
        await arq.delete(f"arq:job:{job_id}")


async def schedule(pool, tenant, kind, ref_id, due_at):
    async with tenant_transaction(pool, tenant.schema) as conn:
        await due.schedule_due(conn, tenant.id, kind, ref_id, due_at)


async def test_sweeper_reenqueues_due_work_lost_by_redis(client, pool, tenant, receiver, arq,
                                                         run_worker):
    await subscribe(client, tenant, receiver.url())
    await emit_event(pool, tenant)
    [delivery] = await deliveries(pool, tenant)
    [row] = await due_rows(pool, [delivery["id"]])
    job_id = due.job_id(row["id"], row["version"])
    await due.sweep_due({"db": pool, "redis": arq})
    assert await queued(arq, job_id)
    await forget_queue(arq, [job_id])
    assert not await queued(arq, job_id)
    assert await due.sweep_due({"db": pool, "redis": arq}) >= 1
    assert await queued(arq, job_id)
    await run_worker()
    assert len(receiver.requests) == 1


async def test_enqueuing_twice_delivers_once(client, pool, tenant, receiver, arq, run_worker):
    await subscribe(client, tenant, receiver.url())
    await emit_event(pool, tenant)
    [delivery] = await deliveries(pool, tenant)
    [row] = await due_rows(pool, [delivery["id"]])
    await due.enqueue(arq, row["id"], row["version"], row["due_at"])
    await due.enqueue(arq, row["id"], row["version"], row["due_at"])
    # Even a second job under another id (a queue that lost its dedupe) runs the work once.
    await arq.enqueue_job("run_due", str(row["id"]), row["version"], _job_id=f"x:{uuid.uuid4()}")
    await run_worker()
    assert len(receiver.requests) == 1
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"]) == ("delivered", 1)


async def test_commit_notifies_the_worker_which_enqueues(client, pool, tenant, receiver, arq,
                                                         servers, run_worker):
    ctx = {"db": pool, "redis": arq, "database_url": servers.database_url}
    await due.start_listener(ctx)
    try:
        await subscribe(client, tenant, receiver.url())
        await emit_event(pool, tenant)
        [delivery] = await deliveries(pool, tenant)
        [row] = await due_rows(pool, [delivery["id"]])
        job_id = due.job_id(row["id"], row["version"])
        for _ in range(200):
            if await queued(arq, job_id):
                break
            await asyncio.sleep(0.05)
        assert await queued(arq, job_id)
    finally:
        await due.stop_listener(ctx)
    await run_worker()
    assert len(receiver.requests) == 1


async def test_schedule_due_runs_the_registered_handler_once(pool, tenant, run_worker):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow())
    await run_worker()
    assert handled.count(ref_id) == 1
    assert await due_rows(pool, [ref_id]) == []


async def test_rescheduling_supersedes_the_earlier_time(pool, tenant, arq, run_worker):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow() - timedelta(seconds=1))
    [first] = await due_rows(pool, [ref_id])
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow() + timedelta(hours=1))
    [second] = await due_rows(pool, [ref_id])
    assert (second["id"], second["version"]) == (first["id"], first["version"] + 1)
    # The job queued for the old time finds a newer version and does nothing.
    await arq.enqueue_job("run_due", str(first["id"]), first["version"],
                          _job_id=due.job_id(first["id"], first["version"]))
    await run_worker()
    assert ref_id not in handled
    assert len(await due_rows(pool, [ref_id])) == 1
    async with tenant_transaction(pool, tenant.schema) as conn:
        await due.cancel_due(conn, RECORD_KIND, ref_id)
    assert await due_rows(pool, [ref_id]) == []


async def test_work_rescheduled_while_running_runs_again(pool, tenant, run_worker):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, RESCHEDULE_KIND, ref_id, utcnow())
    await run_worker()
    assert handled.count(ref_id) == 2
    assert await due_rows(pool, [ref_id]) == []


async def test_cancelled_work_never_runs(pool, tenant, arq, run_worker):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    await due.enqueue(arq, row["id"], row["version"], row["due_at"])
    async with tenant_transaction(pool, tenant.schema) as conn:
        await due.cancel_due(conn, RECORD_KIND, ref_id)
    await run_worker()
    assert ref_id not in handled


async def test_failing_handler_is_rescheduled_with_its_error(pool, tenant, arq, run_worker):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, FAIL_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    await due.enqueue(arq, row["id"], row["version"], row["due_at"])
    await run_worker(max_burst_jobs=1)
    [after] = await due_rows(pool, [ref_id])
    assert after["last_error"] == "RuntimeError"
    assert after["due_at"] > utcnow()
    assert after["version"] > row["version"]
    await forget_queue(arq, [due.job_id(after["id"], after["version"])])
    async with tenant_transaction(pool, tenant.schema) as conn:
        await due.cancel_due(conn, FAIL_KIND, ref_id)


def test_worker_runs_the_sweeper_every_few_seconds():
    from jobs.worker import cron_jobs, functions

    [sweeper] = [job for job in cron_jobs() if job.name == "sweep_due"]
    assert len(sweeper.second) >= 6
    assert "run_due" in [getattr(f, "name", None) for f in functions()]


async def test_work_of_a_suspended_sub_account_waits_until_it_is_resumed(pool, tenant,
                                                                        run_worker):
    ref_id = uuid.uuid4()
    await pool.execute("UPDATE control.sub_accounts SET status = 'suspended' WHERE id = $1",
                       tenant.id)
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow())
    await run_worker()
    assert ref_id not in handled
    assert len(await due_rows(pool, [ref_id])) == 1
    await pool.execute("UPDATE control.sub_accounts SET status = 'active' WHERE id = $1",
                       tenant.id)
    await run_worker()
    assert handled.count(ref_id) == 1
