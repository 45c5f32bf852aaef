"""The due-work engine: runs the rows of `control.due_work` (tenancy/due.py) with arq.

Each kind of work has a `DueHandler`, listed in the composition root (cli/wiring.py) and handed to
the worker: `async def handler(ctx, work: DueWork)` returns None when the work is done (the row
is deleted) or the aware datetime at which it must run again (the row is rescheduled). It must be
idempotent: it may run again after a crash, so it reloads its state from the database.
A failed run (an exception, a run longer than the lease, a cancellation, or a claim whose lease
ran out without an outcome) reschedules the row with a capped backoff and records why
(`last_error`: exception class and message); after `SWITCHBOARD_DUE_WORK_MAX_FAILURES` (10)
failed runs in a row the row becomes `failed`: never swept or run again, listed by
`switchboard due-work failed`, run again by `switchboard due-work retry`.

How it runs: the worker LISTENs on a dedicated connection and enqueues `run_due` with
`_defer_until=due_at` and a job id derived from (row id, version), so enqueuing twice runs once
(job ids are per Redis, whatever the queue). The job goes to the arq queue its kind's handler
names (`DueHandler.queue`), so each kind of work runs with capacity of its own (jobs/worker.py).
`run_due` claims the row with `FOR UPDATE SKIP LOCKED` and a lease (the claim also bumps the
version), calls the handler, then deletes or reschedules the row. A cron sweeper (every 5 s, and
once at worker start) re-enqueues due, unleased rows that Redis lost or never got, and revives a
row whose job a worker took and died holding before it claimed the row (`revive_if_stuck`).

The claim's lease is short (CLAIM_SECONDS) and renewed every RENEW_SECONDS while the run goes
on (`Lease`), up to the handler's `lease_seconds`, the longest a run may last. So the row of a
worker that dies mid-run (SIGKILL, a lost host) is free again within CLAIM_SECONDS, and the
next sweep queues it: work due meanwhile runs within CLAIM_SECONDS + the sweep interval of a
worker running (CONTRACT 18a: within 30 s), not after the handler's whole lease. A run that
cannot renew (the database unreachable) is stopped before its claim can run out, so another
worker never runs the row while it still does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from arq import cron
from arq.constants import default_queue_name, in_progress_key_prefix
from arq.worker import func

from tenancy.clock import utcnow
from tenancy.db import asyncpg_dsn, retry_stale_statements
from tenancy.due import CHANNEL, DueWork
from tenancy.settings import get_settings

log = logging.getLogger("switchboard.due")

SWEEP_LIMIT = 1000
MAX_ERROR_BACKOFF_SECONDS = 600
DEFAULT_LEASE = timedelta(minutes=5)
# A claim holds the row this long unless renewed; a running claim is renewed this often. A run
# that has not renewed for CLAIM_SECONDS - RENEW_SECONDS is stopped (its claim may lapse before
# the next renewal). The sweep (every 5 s) then finds a dead worker's row within 20 s.
CLAIM_SECONDS = 15.0
RENEW_SECONDS = 5.0

Handler = Callable[[dict[str, Any], DueWork], Awaitable[datetime | None]]

# arq's own queue: the provider jobs a request waits for, housekeeping and cron jobs; never due
# work. A kind of due work names its queue, or shares BACKGROUND_QUEUE with the others that
# do not (jobs/worker.py serves both).
DEFAULT_QUEUE: str = default_queue_name
BACKGROUND_QUEUE = "arq:queue:background"


@dataclass(frozen=True)
class DueHandler:
    """What runs the due work of one kind; one run may last `lease_seconds` (its claim on the
    row renewed meanwhile, `Lease`). Its runs are queued on `queue`, one of the worker's queues
    (jobs/worker.py)."""

    kind: str
    handler: Handler
    lease_seconds: float = 300
    queue: str = BACKGROUND_QUEUE

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)


def handlers_by_kind(handlers: list[DueHandler]) -> dict[str, DueHandler]:
    by_kind: dict[str, DueHandler] = {}
    for entry in handlers:
        if entry.kind in by_kind:
            raise ValueError(f"two due-work handlers for kind {entry.kind!r}")
        by_kind[entry.kind] = entry
    return by_kind


# --- enqueueing -------------------------------------------------------------------------------


def job_id(due_id: uuid.UUID | str, version: int) -> str:
    return f"due:{due_id}:{version}"


def queue_of(ctx: dict[str, Any], kind: str | None) -> str:
    """The arq queue that runs work of `kind` (the background queue for a kind nobody
    handles, where its run records the failure)."""
    registration = ctx.get("due_handlers", {}).get(kind) if kind is not None else None
    return registration.queue if registration is not None else BACKGROUND_QUEUE


async def enqueue(
    redis: Any,
    due_id: uuid.UUID | str,
    version: int,
    due_at: datetime,
    queue: str = BACKGROUND_QUEUE,
) -> bool:
    """Queue `run_due` for this version of the row on `queue`; a no-op (False) when that job is
    already queued or running (on any queue)."""
    defer = due_at if due_at > utcnow() else None
    job = await redis.enqueue_job(
        "run_due",
        str(due_id),
        version,
        _job_id=job_id(due_id, version),
        _defer_until=defer,
        _queue_name=queue,
    )
    return job is not None


# Work of a suspended or deleted sub-account waits (it runs again if the tenant is resumed).
SELECT_SWEEP = """
SELECT w.id, w.version, w.due_at, w.kind FROM control.due_work AS w
JOIN control.sub_accounts AS s ON s.id = w.sub_account_id AND s.status = 'active'
WHERE w.status = 'pending' AND w.due_at <= now()
  AND (w.claimed_until IS NULL OR w.claimed_until < now())
ORDER BY w.due_at
LIMIT $1
"""


async def sweep_due(ctx: dict[str, Any]) -> int:
    """Enqueue every due, unleased row (the queue dedupes the ones it still holds)."""
    rows = await ctx["db"].fetch(SELECT_SWEEP, SWEEP_LIMIT)
    for row in rows:
        queue = queue_of(ctx, row["kind"])
        if not await enqueue(ctx["redis"], row["id"], row["version"], row["due_at"], queue):
            await revive_if_stuck(ctx, row)
    return len(rows)


# A worker that dies (SIGKILL, a lost host) after arq handed it a job and before run_due claimed
# the row leaves the job "in progress" in Redis (arq's in-progress key lives for the job
# timeout plus 10 s: 310 s here) and the row due and unclaimed: enqueueing that job id again is
# a no-op, so without more the row would wait those 310 s. A live run claims within
# milliseconds of starting; one that has not, STUCK_AFTER after a sweep first saw it so, is
# taken for dead. Its row gets a new version (the old job, if it ever runs, claims nothing),
# and that version is queued.
STUCK_AFTER = timedelta(seconds=10)
STUCK_SEEN_KEY = "switchboard:due:unclaimed:"
STUCK_SEEN_KEEP_MS = 600_000

REVIVE = """
UPDATE control.due_work SET version = version + 1, updated_at = now()
WHERE id = $1 AND version = $2 AND status = 'pending'
  AND (claimed_until IS NULL OR claimed_until < now())
RETURNING id, version, due_at, kind
"""


async def revive_if_stuck(ctx: dict[str, Any], row: Any) -> bool:
    """The due, unleased `row` (SELECT_SWEEP's) whose job is already queued: when that job is
    running and has not claimed the row STUCK_AFTER after this was first seen, queue a new
    version of the row (True)."""
    redis = ctx["redis"]
    job = job_id(row["id"], row["version"])
    if not await redis.exists(in_progress_key_prefix + job):
        return False  # waiting in its queue: it will run
    now_ms = int(utcnow().timestamp() * 1000)
    seen = STUCK_SEEN_KEY + job
    await redis.set(seen, now_ms, nx=True, px=STUCK_SEEN_KEEP_MS)
    first_seen = int(await redis.get(seen) or now_ms)
    if now_ms - first_seen < STUCK_AFTER.total_seconds() * 1000:
        return False
    revived = await ctx["db"].fetchrow(REVIVE, row["id"], row["version"])
    if revived is None:
        return False  # claimed or rescheduled meanwhile
    log.warning(
        "due work %s (%s): its job %s was taken by a worker that never claimed it; queued again",
        row["id"],
        row["kind"],
        job,
    )
    await enqueue(
        redis, revived["id"], revived["version"], revived["due_at"], queue_of(ctx, row["kind"])
    )
    return True


# --- running ----------------------------------------------------------------------------------

SELECT_CLAIMABLE = """
SELECT w.kind FROM control.due_work AS w
JOIN control.sub_accounts AS s ON s.id = w.sub_account_id AND s.status = 'active'
WHERE w.id = $1 AND w.version = $2 AND w.status = 'pending' AND w.due_at <= now()
  AND (w.claimed_until IS NULL OR w.claimed_until < now())
FOR UPDATE OF w SKIP LOCKED
"""

# A lease still set here ran out without an outcome (the worker died mid-run): a failed run.
CLAIM = """
UPDATE control.due_work AS w
SET version = w.version + 1, attempts = w.attempts + 1, claimed_until = now() + $2::interval,
    claimed_version = w.version + 1, updated_at = now(),
    failures = w.failures + CASE WHEN w.claimed_until IS NULL THEN 0 ELSE 1 END,
    last_error = CASE WHEN w.claimed_until IS NULL THEN w.last_error
                      ELSE 'LeaseExpired: a run ended without an outcome (worker lost)' END
FROM control.sub_accounts AS s
WHERE w.id = $1 AND s.id = w.sub_account_id
RETURNING w.id, w.sub_account_id, s.schema_name, w.kind, w.ref_id, w.due_at, w.attempts,
          w.version, w.failures, w.last_error
"""

FINISH_DONE = "DELETE FROM control.due_work WHERE id = $1 AND version = $2 RETURNING id"

FINISH_AGAIN = """
UPDATE control.due_work
SET due_at = $3, version = version + 1, claimed_until = NULL, claimed_version = NULL,
    failures = 0, last_error = NULL, updated_at = now()
WHERE id = $1 AND version = $2
RETURNING id, version, due_at
"""

# A failed run: retried at $5, or set aside as `failed` once it is the $4th in a row.
FINISH_FAILED = """
UPDATE control.due_work
SET version = version + 1, claimed_until = NULL, claimed_version = NULL, last_error = $3,
    failures = failures + 1,
    status = CASE WHEN failures + 1 >= $4 THEN 'failed' ELSE 'pending' END,
    failed_at = CASE WHEN failures + 1 >= $4 THEN now() END,
    due_at = CASE WHEN failures + 1 >= $4 THEN due_at ELSE $5 END,
    updated_at = now()
WHERE id = $1 AND version = $2
RETURNING id, version, due_at, status
"""

# Earlier runs died without an outcome often enough: set aside without running it again.
SET_ASIDE = """
UPDATE control.due_work
SET version = version + 1, claimed_until = NULL, claimed_version = NULL, status = 'failed',
    failed_at = now(), updated_at = now()
WHERE id = $1 AND version = $2
"""

# Rescheduled while it ran: release our lease (not a later claim's) so the new version can run.
RELEASE = """
UPDATE control.due_work SET claimed_until = NULL, claimed_version = NULL, updated_at = now()
WHERE id = $1 AND claimed_version = $2
RETURNING id, version, due_at
"""


# Our claim (not a later one's) held CLAIM_SECONDS more; no row once it was finished, cancelled
# (deleted) or claimed again.
RENEW = """
UPDATE control.due_work SET claimed_until = now() + $3::interval
WHERE id = $1 AND claimed_version = $2
RETURNING id
"""


class Lease:
    """Keeps a running claim alive: every RENEW_SECONDS its lease is renewed to CLAIM_SECONDS
    ahead. When renewals fail (the database unreachable) until the claim could lapse before the
    next one, the run's `timer` is expired at once: the run stops before another worker may
    claim the row. Once the row is gone or claimed again, renewing stops."""

    def __init__(self, pool: asyncpg.Pool, work: DueWork, timer: asyncio.Timeout) -> None:
        self.pool = pool
        self.work = work
        self.timer = timer
        self.lost = False

    async def keep(self) -> None:
        loop = asyncio.get_running_loop()
        held_since = loop.time()  # the claim was taken just before the run started
        interval = timedelta(seconds=CLAIM_SECONDS)
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            asked = loop.time()
            try:
                async with asyncio.timeout(RENEW_SECONDS):
                    renewed = await self.pool.fetchval(
                        RENEW, self.work.id, self.work.version, interval
                    )
            except Exception:
                log.warning("could not renew the claim of due work %s", self.work.id, exc_info=True)
            else:
                if renewed is None:
                    return
                held_since = asked
            if loop.time() - held_since >= CLAIM_SECONDS - RENEW_SECONDS:
                self.lost = True
                self.timer.reschedule(loop.time())
                return


async def claim(
    pool: asyncpg.Pool, handlers: dict[str, DueHandler], due_id: uuid.UUID, version: int
) -> DueWork | None:
    async with pool.acquire() as conn, conn.transaction():
        kind = await conn.fetchval(SELECT_CLAIMABLE, due_id, version)
        if kind is None:
            return None
        registration = handlers.get(kind)
        lease = registration.lease if registration else DEFAULT_LEASE
        row = await conn.fetchrow(CLAIM, due_id, min(lease, timedelta(seconds=CLAIM_SECONDS)))
    if row is None:
        return None
    return DueWork(
        row["id"],
        row["sub_account_id"],
        row["schema_name"],
        row["kind"],
        row["ref_id"],
        row["due_at"],
        row["attempts"],
        row["version"],
        row["failures"],
        row["last_error"],
    )


async def finish(ctx: dict[str, Any], work: DueWork, next_at: datetime | None) -> None:
    async with ctx["db"].acquire() as conn, conn.transaction():
        if next_at is None:
            if await conn.fetchval(FINISH_DONE, work.id, work.version) is not None:
                return
            row = None
        else:
            row = await conn.fetchrow(FINISH_AGAIN, work.id, work.version, next_at)
        if row is None:
            row = await conn.fetchrow(RELEASE, work.id, work.version)
    if row is not None:
        await enqueue(
            ctx["redis"], row["id"], row["version"], row["due_at"], queue_of(ctx, work.kind)
        )


def max_failures() -> int:
    return get_settings().due_work_max_failures


async def finish_failed(ctx: dict[str, Any], work: DueWork, reason: str) -> None:
    """Record a failed run: retry after a capped backoff, or set the row aside as `failed`."""
    backoff = min(5 * 2 ** min(work.failures, 10), MAX_ERROR_BACKOFF_SECONDS)
    async with ctx["db"].acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            FINISH_FAILED,
            work.id,
            work.version,
            reason[:2000],
            max_failures(),
            utcnow() + timedelta(seconds=backoff),
        )
        if row is None:
            row = await conn.fetchrow(RELEASE, work.id, work.version)
    if row is not None and row.get("status") == "failed":
        log.error(
            "due work %s (%s, %s) failed for good after %d failed runs: %s",
            work.id,
            work.kind,
            work.ref_id,
            work.failures + 1,
            reason,
        )
    elif row is not None:
        await enqueue(
            ctx["redis"], row["id"], row["version"], row["due_at"], queue_of(ctx, work.kind)
        )


CANCELLED = "CancelledError: the run was cancelled (worker shutdown or job timeout)"


def failure_reason(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


async def run_due(ctx: dict[str, Any], due_id: str, version: int) -> None:
    """arq task: claim one due row, run its kind's handler, record the outcome."""
    handlers: dict[str, DueHandler] = ctx["due_handlers"]
    work = await claim(ctx["db"], handlers, uuid.UUID(due_id), version)
    if work is None:
        return
    if work.failures >= max_failures():
        await ctx["db"].execute(SET_ASIDE, work.id, work.version)
        log.error(
            "due work %s (%s, %s) failed for good: %s",
            work.id,
            work.kind,
            work.ref_id,
            work.last_error,
        )
        return
    registration = handlers.get(work.kind)
    lease = registration.lease.total_seconds() if registration else 0
    held: Lease | None = None
    try:
        if registration is None:
            raise LookupError(f"no handler registered for due work kind {work.kind!r}")
        handler = registration.handler
        async with asyncio.timeout(lease) as timer:
            held = Lease(ctx["db"], work, timer)
            keeper = asyncio.create_task(held.keep(), name=f"due-lease-{work.id}")
            try:
                # A statement cached before a tenant's schema change is not the handler's
                # failure: the run is repeated while nothing of it has committed (tenancy.db).
                next_at = await retry_stale_statements(lambda: handler(ctx, work))
            finally:
                keeper.cancel()
    except asyncio.CancelledError:
        # A worker shutting down, or arq's job timeout: recorded, then the cancel goes on. If
        # even that cannot be written, the lease runs out and the next claim counts the run.
        try:
            await asyncio.shield(finish_failed(ctx, work, CANCELLED))
        except Exception:
            log.warning("could not record the cancelled run of due work %s", work.id, exc_info=True)
        raise
    except Exception as exc:
        if held is not None and isinstance(exc, TimeoutError) and held.lost:
            reason = "ClaimLost: the run could not renew its claim on the row, so it was stopped"
        elif registration is not None and isinstance(exc, TimeoutError) and timer.expired():
            reason = f"TimeoutError: the run took longer than its {lease:g} s lease"
        else:
            reason = failure_reason(exc)
        log.exception("due work %s (%s) failed: %s", work.id, work.kind, reason)
        await finish_failed(ctx, work, reason)
        return
    await finish(ctx, work, next_at)


# --- the worker's LISTEN connection -----------------------------------------------------------


class Listener:
    """Holds a LISTEN connection; on each notification enqueues the row's job. Reconnects."""

    def __init__(self, ctx: dict[str, Any]) -> None:
        self.ctx = ctx
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        self.pending: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name="due-listener")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.ready.wait(), timeout=10)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        for task in list(self.pending):
            task.cancel()

    async def _run(self) -> None:
        while True:
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("due-work listener connection failed; reconnecting", exc_info=True)
            await asyncio.sleep(1)

    async def _listen(self) -> None:
        # LISTEN needs a session of its own: behind PgBouncer in transaction mode, point
        # SWITCHBOARD_DIRECT_DATABASE_URL at PostgreSQL itself.
        url = get_settings().direct_database_url or self.ctx["database_url"]
        conn = await asyncpg.connect(asyncpg_dsn(url))
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(CHANNEL, self._notified)
            # Anything committed while nobody listened is picked up now.
            await sweep_due(self.ctx)
            self.ready.set()
            await lost.wait()
        finally:
            if not conn.is_closed():
                await conn.close(timeout=5)

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        task = asyncio.create_task(self._enqueue(payload))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _enqueue(self, payload: str) -> None:
        try:
            message = json.loads(payload)
            due_at = datetime.fromtimestamp(float(message["due_at"]), tz=utcnow().tzinfo)
            await enqueue(
                self.ctx["redis"],
                message["id"],
                int(message["version"]),
                due_at,
                queue_of(self.ctx, message.get("kind")),
            )
        except Exception:
            log.warning("could not enqueue due work from a notification", exc_info=True)


async def start_listener(ctx: dict[str, Any]) -> None:
    listener = Listener(ctx)
    ctx["due_listener"] = listener
    await listener.start()


async def stop_listener(ctx: dict[str, Any]) -> None:
    listener = ctx.pop("due_listener", None)
    if listener is not None:
        await listener.stop()


# The engine's own arq task and cron job, which jobs/worker.py adds to every worker.
RUN_DUE = func(run_due, name="run_due", keep_result=0, max_tries=3)
SWEEP_DUE = cron(sweep_due, name="sweep_due", second=set(range(0, 60, 5)), keep_result=0)
