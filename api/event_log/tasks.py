"""Retention of the event log: events and finished deliveries (with their attempts), and carrier
status reports no send claimed, older than 30 days are deleted by a periodic job, tenant by
tenant, in batches of a few hundred rows, so that no statement holds many row locks or runs for
long."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from api.event_log.service import RETENTION
from tenancy.clock import utcnow
from tenancy.db import tenant_transaction

log = logging.getLogger("switchboard.event_log")

BATCH = 500
# Per table and tenant in one run: a backlog larger than this is left to the next run.
MAX_BATCHES = 100

SELECT_TENANT_SCHEMAS = """
SELECT schema_name FROM control.sub_accounts
WHERE status <> 'deleted' AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[]))
ORDER BY created_at, id
"""

# Each batch is picked once (MATERIALIZED): as a subquery of `id IN (...)` the planner may run
# it again for each row it deletes, each run finding rows the last did not.
DELETE_OLD_EVENTS = """
WITH batch AS MATERIALIZED (SELECT id FROM events WHERE timestamp < $1 LIMIT $2)
DELETE FROM events WHERE id IN (SELECT id FROM batch)
"""

# A pending delivery is never old enough to go; one being sent is skipped until the next batch.
DELETE_OLD_DELIVERIES = """
WITH batch AS MATERIALIZED (
    SELECT id FROM webhook_deliveries
    WHERE completed_at < $1 AND status <> 'pending'
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM batch)
"""

# A carrier's report on a message id that no send stored within the retention (a message sent
# from our number by another system, say) will never be applied.
DELETE_OLD_STATUS_REPORTS = """
WITH batch AS MATERIALIZED (
    SELECT provider_message_id, status FROM message_status_reports
    WHERE received_at < $1 LIMIT $2)
DELETE FROM message_status_reports
WHERE (provider_message_id, status) IN (SELECT provider_message_id, status FROM batch)
"""


async def purge_old_events(ctx: dict[str, Any], sub_account_ids: list[str] | None = None) -> int:
    """One pass over every tenant (or the sub-accounts named, for an operator's run); returns
    how many events and deliveries went."""
    cutoff = utcnow() - RETENTION
    deleted = 0
    only = None if sub_account_ids is None else [uuid.UUID(str(id_)) for id_ in sub_account_ids]
    for tenant in await ctx["db"].fetch(SELECT_TENANT_SCHEMAS, only):
        schema = tenant["schema_name"]
        try:
            for statement in (DELETE_OLD_EVENTS, DELETE_OLD_DELIVERIES, DELETE_OLD_STATUS_REPORTS):
                deleted += await _in_batches(ctx["db"], schema, statement, cutoff)
        except (asyncpg.PostgresError, OSError) as exc:
            # One tenant (mid-migration, say) never stops the others; the next run retries it.
            log.warning("event retention skipped %s: %s", schema, exc)
    if deleted:
        log.info("event retention removed %d rows past %s", deleted, cutoff.date())
    return deleted


async def _in_batches(pool: asyncpg.Pool, schema: str, statement: str, cutoff: datetime) -> int:
    deleted = 0
    for _ in range(MAX_BATCHES):
        async with tenant_transaction(pool, schema) as conn:
            count = int((await conn.execute(statement, cutoff, BATCH)).split()[-1])
        deleted += count
        if count < BATCH:
            break
    return deleted
