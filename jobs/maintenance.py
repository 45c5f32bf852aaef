"""Housekeeping on a schedule: forget idempotency keys past their 24 hours."""

from __future__ import annotations

from typing import Any

from arq import cron

PURGE_IDEMPOTENCY_KEYS = """
DELETE FROM control.idempotency_keys WHERE created_at < now() - interval '24 hours'
"""


async def purge_idempotency_keys(ctx: dict[str, Any]) -> int:
    result = await ctx["db"].execute(PURGE_IDEMPOTENCY_KEYS)
    return int(result.split()[-1])


TASKS = [purge_idempotency_keys]
CRON_JOBS = [cron(purge_idempotency_keys, minute={0, 15, 30, 45}, run_at_startup=False)]
