"""arq worker settings: shared clients made on start-up, tasks take ids and are idempotent."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from arq.connections import RedisSettings
from arq.cron import CronJob
from arq.worker import Function

from jobs.metrics import counted
from tenancy.db import create_pool
from tenancy.settings import get_settings

log = logging.getLogger("switchboard.worker")


async def ping(ctx: dict[str, Any], value: str) -> str:
    """A trivial job: proves the worker runs jobs and reaches the database."""
    await ctx["db"].fetchval("SELECT 1")
    return f"pong:{value}"


async def startup(ctx: dict[str, Any]) -> None:
    ctx["db"] = await create_pool(ctx["database_url"], min_size=1, max_size=10)
    for hook in _collect("ON_STARTUP"):
        await hook(ctx)


async def shutdown(ctx: dict[str, Any]) -> None:
    for hook in _collect("ON_SHUTDOWN"):
        await hook(ctx)
    pool = ctx.get("db")
    if pool is not None:
        await pool.close()


def _collect(attribute: str) -> list[Any]:
    """`TASKS` / `CRON_JOBS` / `ON_STARTUP` / `ON_SHUTDOWN` of every module in the jobs package."""
    import importlib
    import pkgutil

    import jobs

    found: list[Any] = []
    for info in sorted(pkgutil.iter_modules(jobs.__path__), key=lambda m: m.name):
        if info.name not in ("worker", "metrics"):
            found.extend(getattr(importlib.import_module(f"jobs.{info.name}"), attribute, []))
    return found


def _counted(task: Any) -> Any:
    """The task (a coroutine function, arq Function or CronJob) with its runs counted."""
    if isinstance(task, Function | CronJob):
        return dataclasses.replace(task, coroutine=counted(task.coroutine))  # type: ignore[arg-type]
    return counted(task)


def functions() -> list[Any]:
    return [_counted(task) for task in (ping, *_collect("TASKS"))]


def cron_jobs() -> list[Any]:
    return [_counted(job) for job in _collect("CRON_JOBS")]


def worker_settings(database_url: str, redis_url: str, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for arq's Worker, bound to these servers."""

    async def on_startup(ctx: dict[str, Any]) -> None:
        ctx["database_url"] = database_url
        ctx["settings"] = get_settings()
        await startup(ctx)

    settings: dict[str, Any] = {
        "functions": functions(),
        "cron_jobs": cron_jobs(),
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
