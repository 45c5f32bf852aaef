"""The durable scheduler: PostgreSQL keeps the intent, the queue only runs it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta

import pytest

from cli.wiring import JOBS
from jobs import due
from jobs.due import BACKGROUND_QUEUE, DEFAULT_QUEUE, DueHandler
from tenancy.clock import utcnow
from tenancy.db import tenant_transaction
from tenancy.due import cancel_due, schedule_due
from tests.factories import emit_event, subscribe
from tests.helpers import deliveries, due_rows

RECORD_KIND = "test.record"
FAIL_KIND = "test.fail"
handled: list[uuid.UUID] = []


async def record(ctx, work):
    handled.append(work.ref_id)
    return None


async def fail(ctx, work):
    raise RuntimeError("handler broke")


FLAKY_KIND = "test.always_fails"
SLOW_KIND = "test.slow"
HELD_KIND = "test.held"
calls: list[uuid.UUID] = []
held = asyncio.Event()


async def always_fails(ctx, work):
    calls.append(work.ref_id)
    raise ConnectionError("provider unreachable")


async def slow(ctx, work):
    calls.append(work.ref_id)
    await asyncio.sleep(5)


async def held_until_cancelled(ctx, work):
    calls.append(work.ref_id)
    held.set()
    await asyncio.sleep(60)


LONG_KIND = "test.long"


async def long_run(ctx, work):
    """A run that outlasts its claim's own lease several times (its handler lease is 30 s)."""
    calls.append(work.ref_id)
    await asyncio.sleep(2)


RESCHEDULE_KIND = "test.rescheduled_while_running"


async def rescheduled_while_running(ctx, work):
    handled.append(work.ref_id)
    if handled.count(work.ref_id) == 1:
        # What a route rescheduling the same work meanwhile looks like.
        async with tenant_transaction(ctx["db"], work.schema) as conn:
            await schedule_due(conn, work.sub_account_id, work.kind, work.ref_id, utcnow())
    return None


QUEUES = [DEFAULT_QUEUE, BACKGROUND_QUEUE, *(queue.name for queue in JOBS.queues)]


@pytest.fixture
def arq(app):
    return app.app.config["ARQ"]


async def queued(arq, job_id: str) -> bool:
    return await arq.exists(f"arq:job:{job_id}") == 1


async def forget_queue(arq, job_ids) -> None:
    """What Redis losing its data looks like to us: the queued jobs are gone."""
    for job_id in job_ids:
        for queue in QUEUES:
            await arq.zrem(queue, job_id)
        await arq.delete(f"arq:job:{job_id}")


async def schedule(pool, tenant, kind, ref_id, due_at):
    async with tenant_transaction(pool, tenant.schema) as conn:
        await schedule_due(conn, tenant.id, kind, ref_id, due_at)


# The worker of these tests runs every job of the product and these handlers besides.
TEST_JOBS = dataclasses.replace(
    JOBS,
    due_handlers=[
        *JOBS.due_handlers,
        DueHandler(RECORD_KIND, record, lease_seconds=30),
        DueHandler(FAIL_KIND, fail, lease_seconds=30),
        DueHandler(FLAKY_KIND, always_fails, lease_seconds=30),
        DueHandler(SLOW_KIND, slow, lease_seconds=0.3),
        DueHandler(HELD_KIND, held_until_cancelled, lease_seconds=30),
        DueHandler(RESCHEDULE_KIND, rescheduled_while_running, lease_seconds=30),
        DueHandler(LONG_KIND, long_run, lease_seconds=30),
    ],
)


@pytest.fixture
def run_worker(run_worker):
    async def run(**overrides):
        return await run_worker(jobs=TEST_JOBS, **overrides)

    return run


async def test_sweeper_reenqueues_due_work_lost_by_redis(
    client, pool, tenant, receiver, arq, run_worker
):
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


async def test_commit_notifies_the_worker_which_enqueues(
    client, pool, tenant, receiver, arq, servers, run_worker
):
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
    await arq.enqueue_job(
        "run_due",
        str(first["id"]),
        first["version"],
        _job_id=due.job_id(first["id"], first["version"]),
    )
    await run_worker()
    assert ref_id not in handled
    assert len(await due_rows(pool, [ref_id])) == 1
    async with tenant_transaction(pool, tenant.schema) as conn:
        await cancel_due(conn, RECORD_KIND, ref_id)
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
        await cancel_due(conn, RECORD_KIND, ref_id)
    await run_worker()
    assert ref_id not in handled


async def test_failing_handler_is_rescheduled_with_its_error(pool, tenant, arq, run_worker):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, FAIL_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    await due.enqueue(arq, row["id"], row["version"], row["due_at"])
    await run_worker(max_burst_jobs=1)
    [after] = await due_rows(pool, [ref_id])
    assert after["last_error"] == "RuntimeError: handler broke"
    assert after["due_at"] > utcnow()
    assert after["version"] > row["version"]
    await forget_queue(arq, [due.job_id(after["id"], after["version"])])
    async with tenant_transaction(pool, tenant.schema) as conn:
        await cancel_due(conn, FAIL_KIND, ref_id)


def test_worker_runs_the_sweeper_every_few_seconds():
    from cli.wiring import worker_settings

    settings = worker_settings("postgresql://unused", "redis://unused")
    [sweeper] = [job for job in settings["cron_jobs"] if job.name == "sweep_due"]
    assert len(sweeper.second) >= 6
    assert "run_due" in [getattr(f, "name", None) for f in settings["functions"]]


async def test_work_of_a_suspended_sub_account_waits_until_it_is_resumed(pool, tenant, run_worker):
    ref_id = uuid.uuid4()
    await pool.execute(
        "UPDATE control.sub_accounts SET status = 'suspended' WHERE id = $1", tenant.id
    )
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow())
    await run_worker()
    assert ref_id not in handled
    assert len(await due_rows(pool, [ref_id])) == 1
    await pool.execute("UPDATE control.sub_accounts SET status = 'active' WHERE id = $1", tenant.id)
    await run_worker()
    assert handled.count(ref_id) == 1


SWITCHBOARD = [sys.executable, "-m", "cli"]


def switchboard(servers, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis_url}
    return subprocess.run(
        [*SWITCHBOARD, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


async def status_of(pool, ref_id):
    return await pool.fetchrow(
        "SELECT id, status, failures, last_error, failed_at, version"
        " FROM control.due_work WHERE ref_id = $1",
        ref_id,
    )


async def time_passes(pool, arq, ref_id) -> None:
    """The row's backoff is over: due now, and its deferred job is what the sweeper queues."""
    row = await pool.fetchrow("SELECT id, version FROM control.due_work WHERE ref_id = $1", ref_id)
    await forget_queue(arq, [due.job_id(row["id"], row["version"])])
    await pool.execute("UPDATE control.due_work SET due_at = now() WHERE id = $1", row["id"])
    await due.sweep_due({"db": pool, "redis": arq})


async def test_work_that_keeps_failing_ends_failed_with_its_reason(
    pool, tenant, arq, run_worker, worker_env
):
    worker_env(SWITCHBOARD_DUE_WORK_MAX_FAILURES="3")
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, FLAKY_KIND, ref_id, utcnow())
    await run_worker(max_burst_jobs=1)
    first = await status_of(pool, ref_id)
    assert (first["status"], first["failures"]) == ("pending", 1)
    assert first["last_error"] == "ConnectionError: provider unreachable"
    for _ in range(2):
        await time_passes(pool, arq, ref_id)
        await run_worker(max_burst_jobs=1)
    failed = await status_of(pool, ref_id)
    assert (failed["status"], failed["failures"]) == ("failed", 3)
    assert failed["last_error"] == "ConnectionError: provider unreachable"
    assert failed["failed_at"] is not None
    assert calls.count(ref_id) == 3
    # Never retried again: the sweeper passes it by, a stray job for it does nothing.
    await pool.execute(
        "UPDATE control.due_work SET due_at = now() - interval '1 hour' WHERE ref_id = $1", ref_id
    )
    await due.sweep_due({"db": pool, "redis": arq})
    await arq.enqueue_job("run_due", str(failed["id"]), failed["version"])
    await run_worker()
    assert calls.count(ref_id) == 3
    assert (await status_of(pool, ref_id))["status"] == "failed"


async def test_operator_lists_failed_work_and_retries_it(
    pool, tenant, tenant_second, arq, servers, run_worker, worker_env
):
    worker_env(SWITCHBOARD_DUE_WORK_MAX_FAILURES="1")
    ref_id, other_ref_id = uuid.uuid4(), uuid.uuid4()
    await schedule(pool, tenant, FLAKY_KIND, ref_id, utcnow())
    await schedule(pool, tenant_second, FLAKY_KIND, other_ref_id, utcnow())
    await run_worker()
    row = await status_of(pool, ref_id)
    assert row["status"] == "failed"

    listed = switchboard(servers, "due-work", "failed", "--sub-account", str(tenant.id), "--json")
    assert listed.returncode == 0, listed.stderr
    [item] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (item["id"], item["sub_account_id"], item["kind"], item["ref_id"]) == (
        str(row["id"]),
        str(tenant.id),
        FLAKY_KIND,
        str(ref_id),
    )
    assert (item["failures"], item["last_error"]) == (1, "ConnectionError: provider unreachable")
    assert item["failed_at"].endswith("Z")
    plain = switchboard(servers, "due-work", "failed")
    assert plain.returncode == 0, plain.stderr
    assert {str(ref_id), str(other_ref_id)} <= {
        line.split()[3].split(":", 1)[1] for line in plain.stdout.splitlines()
    }

    retried = switchboard(servers, "due-work", "retry", str(row["id"]))
    assert retried.returncode == 0, retried.stderr
    after = await status_of(pool, ref_id)
    assert (after["status"], after["failures"], after["failed_at"]) == ("pending", 0, None)
    await due.sweep_due({"db": pool, "redis": arq})
    await run_worker()
    assert calls.count(ref_id) == 2
    again = switchboard(servers, "due-work", "retry", str(uuid.uuid4()))
    assert again.returncode == 1
    assert "no failed due-work item" in again.stderr


async def test_run_past_its_lease_is_a_failed_run_recorded_as_a_timeout(pool, tenant, run_worker):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, SLOW_KIND, ref_id, utcnow())
    await run_worker(max_burst_jobs=1)
    row = await status_of(pool, ref_id)
    assert (row["status"], row["failures"]) == ("pending", 1)
    assert row["last_error"] == "TimeoutError: the run took longer than its 0.3 s lease"


async def test_cancelled_run_is_a_failed_run_recorded_as_a_cancellation(pool, tenant, arq):
    ref_id = uuid.uuid4()
    held.clear()
    await schedule(pool, tenant, HELD_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    ctx = {"db": pool, "redis": arq, "due_handlers": due.handlers_by_kind(TEST_JOBS.due_handlers)}
    running = asyncio.create_task(due.run_due(ctx, str(row["id"]), row["version"]))
    await asyncio.wait_for(held.wait(), 10)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    after = await status_of(pool, ref_id)
    assert (after["status"], after["failures"]) == ("pending", 1)
    assert after["last_error"].startswith("CancelledError")


async def test_work_whose_runs_keep_dying_is_set_aside_without_running(
    pool, tenant, arq, run_worker, worker_env
):
    worker_env(SWITCHBOARD_DUE_WORK_MAX_FAILURES="1")
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    # A worker claims it and dies mid-run: its lease runs out without an outcome.
    handlers = due.handlers_by_kind(TEST_JOBS.due_handlers)
    assert await due.claim(pool, handlers, row["id"], row["version"]) is not None
    await pool.execute(
        "UPDATE control.due_work SET claimed_until = now() - interval '1 second' WHERE id = $1",
        row["id"],
    )
    await due.sweep_due({"db": pool, "redis": arq})
    await run_worker()
    assert ref_id not in handled
    after = await status_of(pool, ref_id)
    assert (after["status"], after["failures"]) == ("failed", 1)
    assert after["last_error"].startswith("LeaseExpired")


async def test_scheduling_failed_work_again_revives_it(pool, tenant, run_worker, worker_env):
    worker_env(SWITCHBOARD_DUE_WORK_MAX_FAILURES="1")
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, FLAKY_KIND, ref_id, utcnow())
    await run_worker()
    assert (await status_of(pool, ref_id))["status"] == "failed"
    await schedule(pool, tenant, FLAKY_KIND, ref_id, utcnow() + timedelta(hours=1))
    revived = await status_of(pool, ref_id)
    assert (revived["status"], revived["failures"], revived["failed_at"]) == ("pending", 0, None)


async def test_a_job_taken_by_a_worker_that_died_before_claiming_it_is_queued_again(
    pool, tenant, arq, monkeypatch
):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    ctx = {"db": pool, "redis": arq, "due_handlers": due.handlers_by_kind(TEST_JOBS.due_handlers)}
    # Given: a worker took the row's job (arq's in-progress key, kept 310 s) and died before
    # it claimed the row, which stays due and unclaimed; queueing that job again is a no-op.
    assert await due.enqueue(arq, row["id"], row["version"], row["due_at"])
    taken = due.job_id(row["id"], row["version"])
    await arq.psetex(f"arq:in-progress:{taken}", 310_000, b"1")

    # When: sweeps see it so, the first too soon to tell a dead worker from a slow one.
    await due.sweep_due(ctx)
    assert (await status_of(pool, ref_id))["version"] == row["version"]
    monkeypatch.setattr(due, "STUCK_AFTER", timedelta(0))
    await due.sweep_due(ctx)

    # Then: a new version of the row is queued and runs once; the dead worker's job, should it
    # ever run, claims nothing.
    revived = await status_of(pool, ref_id)
    assert revived["version"] == row["version"] + 1
    assert await queued(arq, due.job_id(row["id"], revived["version"]))
    await due.run_due(ctx, str(row["id"]), revived["version"])
    await due.run_due(ctx, str(row["id"]), row["version"])
    assert handled.count(ref_id) == 1
    assert await status_of(pool, ref_id) is None


# --- the claim's short, renewed lease (CONTRACT 18a) --------------------------------------------


async def swept(pool) -> list[uuid.UUID]:
    """The rows a sweep would queue now."""
    return [row["id"] for row in await pool.fetch(due.SELECT_SWEEP, due.SWEEP_LIMIT)]


@pytest.fixture
def short_claims(monkeypatch):
    """Claims of 0.6 s renewed every 0.2 s (15 s and 5 s in production), so a test sees a claim
    outlive its own lease many times over."""
    monkeypatch.setattr(due, "CLAIM_SECONDS", 0.6)
    monkeypatch.setattr(due, "RENEW_SECONDS", 0.2)


async def test_a_long_run_keeps_its_claim_and_runs_once(pool, tenant, arq, short_claims):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, LONG_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    ctx = {"db": pool, "redis": arq, "due_handlers": due.handlers_by_kind(TEST_JOBS.due_handlers)}
    running = asyncio.create_task(due.run_due(ctx, str(row["id"]), row["version"]))

    await asyncio.sleep(1.5)  # 2.5 claim leases
    claimed = await status_of(pool, ref_id)
    # Still held: the sweeper leaves it be, and no other claim takes it.
    assert row["id"] not in await swept(pool)
    assert await due.claim(pool, ctx["due_handlers"], row["id"], claimed["version"]) is None
    await running

    assert calls.count(ref_id) == 1
    assert await status_of(pool, ref_id) is None


async def test_a_claim_left_by_a_dead_run_is_free_within_its_short_lease(
    pool, tenant, arq, short_claims
):
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, RECORD_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    handlers = due.handlers_by_kind(TEST_JOBS.due_handlers)
    # A worker claims it (handler lease 30 s) and dies: nobody renews the claim.
    assert await due.claim(pool, handlers, row["id"], row["version"]) is not None
    ctx = {"db": pool, "redis": arq, "due_handlers": handlers}
    assert row["id"] not in await swept(pool)

    await asyncio.sleep(0.8)

    assert row["id"] in await swept(pool)  # the sweeper queues it after 0.6 s, not 30 s
    claimed = await status_of(pool, ref_id)
    await due.run_due(ctx, str(row["id"]), claimed["version"])
    assert handled.count(ref_id) == 1
    assert await status_of(pool, ref_id) is None


async def test_a_run_that_cannot_renew_its_claim_is_stopped_before_it_lapses(
    pool, tenant, arq, short_claims, monkeypatch
):
    # The database stops answering the renewals (each takes longer than a renewal may).
    monkeypatch.setattr(due, "RENEW", "SELECT pg_sleep(5), $1::uuid, $2::bigint, $3::interval")
    ref_id = uuid.uuid4()
    await schedule(pool, tenant, LONG_KIND, ref_id, utcnow())
    [row] = await due_rows(pool, [ref_id])
    ctx = {"db": pool, "redis": arq, "due_handlers": due.handlers_by_kind(TEST_JOBS.due_handlers)}

    await asyncio.wait_for(due.run_due(ctx, str(row["id"]), row["version"]), 1.5)

    after = await status_of(pool, ref_id)
    assert (after["status"], after["failures"]) == ("pending", 1)
    assert after["last_error"].startswith("ClaimLost")
