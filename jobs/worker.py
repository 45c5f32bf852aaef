"""arq worker settings: shared clients made on start-up, tasks take ids and are idempotent.

The worker runs what it is given: the feature tasks, cron jobs and due-work handlers listed in the
composition root (cli/wiring.py), plus the engine's own `run_due` and `sweep_due`.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from arq.connections import RedisSettings
from arq.cron import CronJob
from arq.worker import Function

from jobs.due import RUN_DUE, SWEEP_DUE, DueHandler, handlers_by_kind, start_listener, stop_listener
from jobs.metrics import counted
from tenancy.db import create_pool
from tenancy.settings import get_settings

log = logging.getLogger("switchboard.worker")


@dataclass(frozen=True)
class Jobs:
    """Everything a worker runs besides the engine: arq tasks (coroutine functions or arq
    `func(...)`), cron jobs, and one handler per kind of due work."""

    tasks: list[Any] = field(default_factory=list)
    cron_jobs: list[CronJob] = field(default_factory=list)
    due_handlers: list[DueHandler] = field(default_factory=list)


async def ping(ctx: dict[str, Any], value: str) -> str:
    """A trivial job: proves the worker runs jobs and reaches the database."""
    await ctx["db"].fetchval("SELECT 1")
    return f"pong:{value}"


async def startup(ctx: dict[str, Any]) -> None:
    ctx["db"] = await create_pool(ctx["database_url"], min_size=1, max_size=10)
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


def worker_settings(database_url: str, redis_url: str, jobs: Jobs,
                    **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for arq's Worker, bound to these servers, running `jobs`."""
    due_handlers = handlers_by_kind(jobs.due_handlers)

    async def on_startup(ctx: dict[str, Any]) -> None:
        ctx["database_url"] = database_url
        ctx["settings"] = get_settings()
        ctx["due_handlers"] = due_handlers
        await startup(ctx)

    settings: dict[str, Any] = {
        "functions": [_counted(task) for task in (ping, RUN_DUE, *jobs.tasks)],
        "cron_jobs": [_counted(job) for job in (SWEEP_DUE, *jobs.cron_jobs)],
        "redis_settings": RedisSettings.from_dsn(redis_url),
        "on_startup": on_startup,
        "on_shutdown": shutdown,
        "max_jobs": 20,
        "job_timeout": 300,
        "keep_result": 3600,
        "handle_signals": True,
    }
    settings.update(overrides)
    return settings
