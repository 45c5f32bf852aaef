"""arq worker settings: shared clients made on start-up, tasks take ids and are idempotent.

The worker runs what it is given: the feature tasks, cron jobs and due-work handlers listed in the
composition root (cli/wiring.py), plus the engine's own `run_due` and `sweep_due`.

Queues (CONTRACT 11, fairness): each kind of work has an arq queue of its own with its own
capacity (`Queue`: calls, webhook deliveries, campaigns, ...), so a backlog of one kind never
holds up another. arq's default queue keeps what the composition root lists as tasks (the
provider jobs a request waits for, maintenance) and the cron jobs (the due-work sweeper among
them), never due work; kinds of due work that name no queue share the background queue. One arq
Worker serves each queue, all in one process and event loop, sharing the database pool and the
due-work listener. `worker_settings()` gives the arguments of the default queue's Worker; its
start-up starts the other queues' Workers and its shut-down stops them, so
`Worker(**worker_settings(...))` is the whole worker. In burst mode the other queues are run after
it, round after round, until every queue is empty (or `max_burst_jobs` jobs ran in all).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arq.connections import RedisSettings, create_pool
from arq.cron import CronJob
from arq.worker import Function, Worker
from redis.exceptions import RedisError

from jobs.due import (
    BACKGROUND_QUEUE,
    DEFAULT_QUEUE,
    RUN_DUE,
    SWEEP_DUE,
    DueHandler,
    handlers_by_kind,
    start_listener,
    stop_listener,
)
from jobs.metrics import counted
from tenancy.db import create_pool as create_db_pool
from tenancy.settings import get_settings

log = logging.getLogger("switchboard.worker")

# The key of the primary Worker's ctx under which the other queues' Workers are found.
GROUP = "worker_queues"
# Options of the primary Worker that the other queues' Workers share.
RESTART_SECONDS = 1.0
SHARED_OPTIONS = (
    "burst",
    "poll_delay",
    "job_timeout",
    "keep_result",
    "max_tries",
    "health_check_interval",
    "retry_jobs",
)


@dataclass(frozen=True)
class Queue:
    """An arq queue of its own: `max_jobs` of its jobs run at once, whatever waits elsewhere.
    `tasks` are the arq tasks enqueued there by name (due work names its queue itself).
    `poll_delay`: how often its Worker looks for jobs that became due (seconds; None: the
    worker's own, arq's 0.5 s unless overridden); a quicker look for work whose every hop
    counts (a call's next step) costs one small Redis query per look."""

    name: str
    max_jobs: int
    tasks: list[Any] = field(default_factory=list)
    poll_delay: float | None = None


@dataclass(frozen=True)
class Jobs:
    """Everything a worker runs besides the engine: arq tasks (coroutine functions or arq
    `func(...)`) and cron jobs of the default queue, one handler per kind of due work (each on
    the queue it names), and the queues besides the default one."""

    tasks: list[Any] = field(default_factory=list)
    cron_jobs: list[CronJob] = field(default_factory=list)
    due_handlers: list[DueHandler] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    # Jobs of the default queue at once, and of the background queue unless `queues` lists it.
    max_jobs: int = 10


async def ping(ctx: dict[str, Any], value: str) -> str:
    """A trivial job: proves the worker runs jobs and reaches the database."""
    await ctx["db"].fetchval("SELECT 1")
    return f"pong:{value}"


async def startup(ctx: dict[str, Any]) -> None:
    # One pool for the jobs of every queue (SWITCHBOARD_DB_POOL_MAX, as docs/operations.md says).
    ctx["db"] = await create_db_pool(
        ctx["database_url"], min_size=1, max_size=get_settings().db_pool_max
    )
    await start_listener(ctx)


async def shutdown(ctx: dict[str, Any]) -> None:
    await stop_listener(ctx)
    pool = ctx.get("db")
    if pool is not None:
        await pool.close()


def _counted(task: Any) -> Any:
    """The task (a coroutine function, arq Function or CronJob) with its runs counted."""
    if isinstance(task, Function | CronJob):
        return dataclasses.replace(task, coroutine=counted(task.coroutine))  # type: ignore[arg-type]
    return counted(task)


def _queues(jobs: Jobs) -> list[Queue]:
    """The queues besides the default one: those listed, and the background queue."""
    queues = list(jobs.queues)
    if BACKGROUND_QUEUE not in [queue.name for queue in queues]:
        queues.append(Queue(BACKGROUND_QUEUE, jobs.max_jobs))
    names = [DEFAULT_QUEUE, *(queue.name for queue in queues)]
    if len(set(names)) != len(names):
        raise ValueError(f"a queue is listed twice: {names}")
    for entry in jobs.due_handlers:
        if entry.queue not in names[1:]:
            raise ValueError(
                f"due work {entry.kind!r} names queue {entry.queue!r}, "
                f"which the worker does not serve besides the default one"
            )
    return queues


def worker_settings(
    database_url: str, redis_url: str, jobs: Jobs, **overrides: Any
) -> dict[str, Any]:
    """Keyword arguments for arq's Worker of the default queue, bound to these servers, running
    `jobs` (the other queues' Workers start and stop with it)."""
    others = _queues(jobs)
    due_handlers = handlers_by_kind(jobs.due_handlers)
    redis_settings = RedisSettings.from_dsn(redis_url)
    # run_due here too: for jobs an older worker queued here before due work had queues.
    functions = [_counted(task) for task in (ping, RUN_DUE, *jobs.tasks)]
    queues = [_Served(DEFAULT_QUEUE, jobs.max_jobs, functions)] + [
        _Served(
            queue.name,
            queue.max_jobs,
            [_counted(RUN_DUE), *map(_counted, queue.tasks)],
            queue.poll_delay,
        )
        for queue in others
    ]
    settings: dict[str, Any] = {
        "functions": functions,
        "cron_jobs": [_counted(job) for job in (SWEEP_DUE, *jobs.cron_jobs)],
        "redis_settings": redis_settings,
        "max_jobs": jobs.max_jobs,
        "job_timeout": 300,
        "keep_result": 3600,
        "handle_signals": True,
    }
    settings.update(overrides)
    shared = {name: settings[name] for name in SHARED_OPTIONS if name in settings}
    group = _Queues(queues, redis_settings, shared, settings.get("max_burst_jobs", -1))

    async def on_startup(ctx: dict[str, Any]) -> None:
        ctx["database_url"] = database_url
        ctx["settings"] = get_settings()
        ctx["due_handlers"] = due_handlers
        await startup(ctx)
        ctx[GROUP] = group
        if not shared.get("burst"):
            await group.start(ctx)

    async def on_shutdown(ctx: dict[str, Any]) -> None:
        try:
            if shared.get("burst"):
                await group.drain(ctx)
            else:
                await group.stop(get_settings().worker_shutdown_grace_seconds)
        finally:
            await shutdown(ctx)

    async def on_job_start(_ctx: dict[str, Any]) -> None:
        group.started_here += 1

    settings.update(on_startup=on_startup, on_shutdown=on_shutdown, on_job_start=on_job_start)
    return settings


@dataclass(frozen=True)
class _Served:
    name: str
    max_jobs: int
    functions: list[Any]
    poll_delay: float | None = None


class _Queues:
    """The Workers of the queues besides the default one, beside the default queue's Worker."""

    def __init__(
        self,
        queues: list[_Served],
        redis_settings: RedisSettings,
        options: dict[str, Any],
        max_burst_jobs: int,
    ) -> None:
        self.default, *self.others = queues
        self.redis_settings = redis_settings
        self.options = options
        self.max_burst_jobs = max_burst_jobs
        self.started_here = 0  # jobs the default queue's Worker started (burst budget)
        self.workers: list[Worker] = []
        self.runs: list[asyncio.Task[None]] = []
        self.deadline: float | None = None

    def _worker(self, queue: _Served, ctx: dict[str, Any], **options: Any) -> Worker:
        base = {
            key: value for key, value in ctx.items() if key not in ("redis", "due_listener", GROUP)
        }
        shared = {**self.options, **options}
        if queue.poll_delay is not None:
            # The queue's own look, unless the worker was told to look sooner still.
            shared["poll_delay"] = min(queue.poll_delay, shared.get("poll_delay", 0.5))
        return Worker(
            queue.functions,
            queue_name=queue.name,
            max_jobs=queue.max_jobs,
            redis_settings=self.redis_settings,
            ctx=base,
            handle_signals=False,
            **shared,
        )

    async def start(self, ctx: dict[str, Any]) -> None:
        for queue in self.others:
            log.info("queue %s: %d jobs at once", queue.name, queue.max_jobs)
            self.runs.append(asyncio.create_task(self._serve(queue, ctx), name=queue.name))

    async def _serve(self, queue: _Served, ctx: dict[str, Any]) -> None:
        """Run the queue's Worker; should it stop on its own (it lost Redis), start another."""
        while self.deadline is None:
            worker = self._worker(queue, ctx)
            self.workers.append(worker)
            try:
                await worker.async_run()
            except Exception:
                log.exception("the worker of queue %s stopped; starting it again", queue.name)
            if self.deadline is not None:
                return
            self.workers.remove(worker)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await close(worker)
            await asyncio.sleep(RESTART_SECONDS)

    def stop_taking_jobs(self, deadline: float) -> None:
        """No new jobs on any of these queues; running ones have until `deadline` (loop time)."""
        if self.deadline is None:
            self.deadline = deadline
        for worker in self.workers:
            worker.allow_pick_jobs = False

    def running(self) -> list[asyncio.Task[Any]]:
        return [
            task for worker in self.workers for task in worker.tasks.values() if not task.done()
        ]

    async def stop(self, grace: float) -> None:
        """Stop taking jobs, give running ones until the deadline (set by `stop_gracefully`, or
        `grace` from now), then stop every Worker (what still runs is cancelled and retried)."""
        loop = asyncio.get_running_loop()
        self.stop_taking_jobs(loop.time() + grace)
        assert self.deadline is not None
        await _finished(self.running, self.deadline)
        for worker in self.workers:
            try:
                await close(worker)
            except (Exception, asyncio.CancelledError):
                log.warning(
                    "closing the worker of queue %s failed", worker.queue_name, exc_info=True
                )
        for run in self.runs:
            run.cancel()
        for run in self.runs:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await run
        self.workers, self.runs = [], []

    async def drain(self, ctx: dict[str, Any]) -> None:
        """Burst mode, once the default queue's Worker is done: every queue that still holds
        jobs (the default one again too) is run in burst until all are empty; jobs one queue's
        work adds to another are run in the next round."""
        budget = self.max_burst_jobs - self.started_here if self.max_burst_jobs >= 0 else -1
        queues = [self.default, *self.others]
        while budget != 0:
            waiting = [queue for queue in queues if await ctx["redis"].zcard(queue.name) > 0]
            if not waiting:
                return
            if budget < 0:
                workers = [self._worker(queue, ctx) for queue in waiting]
                try:
                    await asyncio.gather(*(worker.async_run() for worker in workers))
                finally:
                    for worker in workers:
                        await worker.close()
                continue
            for queue in waiting:  # one queue at a time, so the budget holds across them
                worker = self._worker(queue, ctx, max_burst_jobs=budget)
                try:
                    await worker.async_run()
                finally:
                    await worker.close()
                budget = max(
                    budget - worker.jobs_complete - worker.jobs_failed - worker.jobs_retried, 0
                )
                if budget == 0:
                    return


async def serve(
    make_worker: Callable[[], Worker], redis_url: str, stop: asyncio.Event, grace: float
) -> None:
    """Run the worker `make_worker()` builds until `stop` is set (then gracefully, `grace`
    seconds for running jobs) or, in burst mode, until it is done. Redis not answering, at start
    or later, is no reason to exit: it waits for Redis and starts a new worker (CONTRACT 11)."""
    while await wait_for_redis(redis_url, stop):
        worker = make_worker()
        run = asyncio.create_task(worker.async_run())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not run.done():
            await stop_gracefully(worker, grace)
        await close(worker)
        if not run.done():
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
            return
        if run.cancelled():
            return
        error = run.exception()
        if error is None:
            return  # a burst that is done
        if not isinstance(error, RedisError | OSError):
            raise error
        log.warning(
            "the worker lost Redis (%s: %s); waiting for it to start again",
            type(error).__name__,
            error,
        )


async def close(worker: Worker) -> None:
    """`worker.close()`, and what it leaves undone when Redis is gone (its shut-down: the other
    queues' Workers, the listener, the database pool)."""
    try:
        await worker.close()
    except (RedisError, OSError):
        if worker.on_shutdown is not None:
            await worker.on_shutdown(worker.ctx)
        if worker._pool is not None:
            with contextlib.suppress(Exception):
                await worker._pool.close(close_connection_pool=True)


async def stop_gracefully(worker: Worker, grace: float) -> None:
    """Take no new job on any queue; give the running ones `grace` seconds to finish (what is
    cut off afterwards is retried by arq, and idempotent by design). Then `worker.close()`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    worker.allow_pick_jobs = False
    queues: _Queues | None = worker.ctx.get(GROUP)
    if queues is not None:
        queues.stop_taking_jobs(deadline)

    def running() -> list[asyncio.Task[Any]]:
        mine = [task for task in worker.tasks.values() if not task.done()]
        return mine + (queues.running() if queues is not None else [])

    await _finished(running, deadline)


async def _finished(running: Callable[[], list[asyncio.Task[Any]]], deadline: float) -> None:
    """Until no job runs (`running()` is empty) or the loop's clock passes `deadline`."""
    loop = asyncio.get_running_loop()
    while (tasks := running()) and (left := deadline - loop.time()) > 0:
        await asyncio.wait(tasks, timeout=left)


REDIS_WAIT_LOG_SECONDS = 60.0


async def wait_for_redis(
    redis_url: str, stop: asyncio.Event | None = None, retry_seconds: float = 1.0
) -> bool:
    """Until Redis answers (True), or `stop` is set first (False). While it cannot be reached,
    says so at once and then once a minute, never exits (CONTRACT 11)."""
    settings = dataclasses.replace(RedisSettings.from_dsn(redis_url), conn_retries=0)
    loop = asyncio.get_running_loop()
    logged_at: float | None = None
    while True:
        try:
            redis = await create_pool(settings)
        except (TimeoutError, OSError, RedisError) as exc:
            if logged_at is None or loop.time() - logged_at >= REDIS_WAIT_LOG_SECONDS:
                log.warning(
                    "Redis at %s:%s cannot be reached (%s: %s); waiting for it, trying every %g s",
                    settings.host,
                    settings.port,
                    type(exc).__name__,
                    exc,
                    retry_seconds,
                )
                logged_at = loop.time()
        else:
            await redis.aclose()
            if logged_at is not None:
                log.info("Redis at %s:%s answers; starting", settings.host, settings.port)
            return True
        if stop is None:
            await asyncio.sleep(retry_seconds)
            continue
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), retry_seconds)
            return False
