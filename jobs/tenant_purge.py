"""Purge deleted sub-accounts past their grace period: their schema and control rows go."""

from __future__ import annotations

import logging
from typing import Any

from arq import cron

from tenancy.tenant_ops import purge_due

log = logging.getLogger("switchboard.tenant_purge")

PURGE_BATCH = 100


async def purge_deleted_tenants(ctx: dict[str, Any]) -> int:
    """arq cron: one batch per run; what is left (or failed) goes in the next run."""
    report = await purge_due(ctx["db"], PURGE_BATCH)
    for sub_account_id in report.purged:
        log.info("purged deleted sub-account %s", sub_account_id)
    for sub_account_id, error in report.failed.items():
        log.warning("could not purge sub-account %s: %s", sub_account_id, error)
    return len(report.purged)


TASKS = [purge_deleted_tenants]
CRON_JOBS = [cron(purge_deleted_tenants, minute={7, 37}, run_at_startup=False)]
