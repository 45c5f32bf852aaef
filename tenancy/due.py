"""The durable scheduler's rows, `control.due_work`: what features write and operators read.

Features (from a route's or a job's transaction):

- `schedule_due(conn, sub_account_id, kind, ref_id, due_at)`: insert, or replace the time of,
  the one row per (kind, ref_id). Written in the caller's transaction; rescheduling supersedes
  the earlier time (a job queued for it finds a newer version and does nothing).
- `cancel_due(conn, kind, ref_id)` / `cancel_due_many(conn, kind, ref_ids)`: forget it.

`schedule_due` sends `pg_notify` on CHANNEL in the writing transaction (delivered on commit);
the engine that runs the rows (jobs/due.py) listens there. Operators list the rows set aside as
`failed` and put one back (`switchboard due-work`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from tenancy.scope import TenantScope

CHANNEL = "switchboard_due"


@dataclass(frozen=True)
class DueWork:
    id: uuid.UUID
    sub_account_id: uuid.UUID
    schema: str
    kind: str
    ref_id: uuid.UUID
    due_at: datetime
    attempts: int
    version: int
    # Failed runs in a row before this one, and why the last one failed.
    failures: int = 0
    last_error: str | None = None

    def scope(self, pool: asyncpg.Pool) -> TenantScope:
        """The sub-account the work belongs to, for the feature service that runs it."""
        return TenantScope(pool, self.sub_account_id, self.schema)


# --- service API ------------------------------------------------------------------------------

UPSERT_DUE = """
INSERT INTO control.due_work (sub_account_id, kind, ref_id, due_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (kind, ref_id) DO UPDATE
SET due_at = EXCLUDED.due_at, version = control.due_work.version + 1, status = 'pending',
    failures = 0, failed_at = NULL, updated_at = now()
RETURNING id, version, due_at
"""

DELETE_DUE = "DELETE FROM control.due_work WHERE kind = $1 AND ref_id = ANY($2::uuid[])"


async def schedule_due(conn: asyncpg.Connection, sub_account_id: uuid.UUID, kind: str,
                       ref_id: uuid.UUID, due_at: datetime) -> None:
    """Run `kind` for `ref_id` at `due_at` (replacing any earlier time), once this commits."""
    row = await conn.fetchrow(UPSERT_DUE, sub_account_id, kind, ref_id, due_at)
    await notify(conn, row["id"], row["version"], row["due_at"])


async def cancel_due(conn: asyncpg.Connection, kind: str, ref_id: uuid.UUID) -> None:
    await conn.execute(DELETE_DUE, kind, [ref_id])


async def cancel_due_many(conn: asyncpg.Connection, kind: str,
                          ref_ids: Iterable[uuid.UUID]) -> None:
    ids = list(ref_ids)
    if ids:
        await conn.execute(DELETE_DUE, kind, ids)


async def notify(conn: asyncpg.Connection, due_id: uuid.UUID, version: int,
                 due_at: datetime) -> None:
    payload = json.dumps({"id": str(due_id), "version": version, "due_at": due_at.timestamp()})
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)


# --- operators: failed work ------------------------------------------------------------------

SELECT_FAILED = """
SELECT id, sub_account_id, kind, ref_id, failures, attempts, last_error, failed_at, due_at
FROM control.due_work
WHERE status = 'failed' AND ($1::uuid IS NULL OR sub_account_id = $1)
ORDER BY failed_at, id
"""

RETRY_FAILED = """
UPDATE control.due_work
SET status = 'pending', failures = 0, failed_at = NULL, due_at = now(), version = version + 1,
    updated_at = now()
WHERE id = $1 AND status = 'failed'
RETURNING id, version, due_at
"""


async def list_failed(pool: asyncpg.Pool,
                      sub_account_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    """Work set aside as `failed`, oldest failure first (of one sub-account, or all)."""
    return [dict(row) for row in await pool.fetch(SELECT_FAILED, sub_account_id)]


async def retry_failed(pool: asyncpg.Pool, due_id: uuid.UUID) -> bool:
    """Put one failed row back to run now, with its failure count reset; False if none."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(RETRY_FAILED, due_id)
        if row is not None:
            await notify(conn, row["id"], row["version"], row["due_at"])
    return row is not None
