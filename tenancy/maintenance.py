"""Control-plane housekeeping the worker runs on a schedule: idempotency keys past their 24
hours are forgotten, and deleted sub-accounts past their grace period are purged."""

from __future__ import annotations

import logging
from typing import Any

from tenancy.tenant_ops import purge_due

log = logging.getLogger("switchboard.maintenance")

PURGE_IDEMPOTENCY_KEYS = """
DELETE FROM control.idempotency_keys WHERE created_at < now() - interval '24 hours'
"""

PURGE_BATCH = 100


async def purge_idempotency_keys(ctx: dict[str, Any]) -> int:
    result = await ctx["db"].execute(PURGE_IDEMPOTENCY_KEYS)
    purged = int(result.split()[-1])
    if purged:
        log.info("purged %d expired idempotency keys", purged)
    return purged


async def purge_deleted_tenants(ctx: dict[str, Any]) -> int:
    """One batch per run; what is left (or failed) goes in the next run."""
    report = await purge_due(ctx["db"], PURGE_BATCH)
    for sub_account_id in report.purged:
        log.info("purged deleted sub-account %s", sub_account_id)
    for sub_account_id, error in report.failed.items():
        log.warning("could not purge sub-account %s: %s", sub_account_id, error)
    return len(report.purged)
