"""Job counters by kind and outcome, kept in a Redis hash that /metrics reads."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from tenancy.jobcounts import JOB_COUNTS_KEY

log = logging.getLogger("switchboard.jobs")


def counted(func: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Wrap a job so each run counts as `<name>:ok` or `<name>:failed`."""

    @functools.wraps(func)
    async def wrapper(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        outcome = "failed"
        try:
            result = await func(ctx, *args, **kwargs)
            outcome = "ok"
            return result
        finally:
            redis = ctx.get("redis")
            if redis is not None:
                try:
                    await redis.hincrby(JOB_COUNTS_KEY, f"{func.__name__}:{outcome}", 1)
                except Exception:  # metrics must never fail a job
                    log.debug("could not count job %s", func.__name__)

    return wrapper
