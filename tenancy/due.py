"""The durable scheduler's rows, `control.due_work`: what features write and operators read.

Features (from a route's or a job's transaction):

- `schedule_due(conn, sub_account_id, kind, ref_id, due_at)`: insert, or replace the time of,
  the one row per (kind, ref_id). Written in the caller's transaction; rescheduling supersedes
  the earlier time (a job queued for it finds a newer version and does nothing).
- `cancel_due(conn, kind, ref_id)` / `cancel_due_many(conn, kind, ref_ids)`: forget it.

`schedule_due` sends `pg_notify` on CHANNEL in the writing transaction (delivered on commit);
the engine that runs the rows (jobs/due.py) listens there. Operators list the rows set aside as
`failed` and put one back (`switchboard due-work`).

A handler that must cap how many of its runs go at once (deliveries to one subscription) takes a
slot with `take_slot(redis, groups, token, seconds)` before the work and gives it back after;
slots live in Redis with an expiry, so a worker that dies cannot keep one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from tenancy.clock import utcnow
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
RETURNING id, version, due_at, kind
"""

DELETE_DUE = "DELETE FROM control.due_work WHERE kind = $1 AND ref_id = ANY($2::uuid[])"


async def schedule_due(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    kind: str,
    ref_id: uuid.UUID,
    due_at: datetime,
) -> None:
    """Run `kind` for `ref_id` at `due_at` (replacing any earlier time), once this commits."""
    row = await conn.fetchrow(UPSERT_DUE, sub_account_id, kind, ref_id, due_at)
    await notify(conn, row["id"], row["version"], row["due_at"], row["kind"])


async def cancel_due(conn: asyncpg.Connection, kind: str, ref_id: uuid.UUID) -> None:
    await conn.execute(DELETE_DUE, kind, [ref_id])


async def cancel_due_many(
    conn: asyncpg.Connection, kind: str, ref_ids: Iterable[uuid.UUID]
) -> None:
    ids = list(ref_ids)
    if ids:
        await conn.execute(DELETE_DUE, kind, ids)


async def notify(
    conn: asyncpg.Connection, due_id: uuid.UUID, version: int, due_at: datetime, kind: str
) -> None:
    """Tell the worker, on commit, to queue this version of the row (on its kind's queue)."""
    payload = json.dumps(
        {"id": str(due_id), "version": version, "due_at": due_at.timestamp(), "kind": kind}
    )
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
RETURNING id, version, due_at, kind
"""


async def list_failed(
    pool: asyncpg.Pool, sub_account_id: uuid.UUID | None = None
) -> list[dict[str, Any]]:
    """Work set aside as `failed`, oldest failure first (of one sub-account, or all)."""
    return [dict(row) for row in await pool.fetch(SELECT_FAILED, sub_account_id)]


async def retry_failed(pool: asyncpg.Pool, due_id: uuid.UUID) -> bool:
    """Put one failed row back to run now, with its failure count reset; False if none."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(RETRY_FAILED, due_id)
        if row is not None:
            await notify(conn, row["id"], row["version"], row["due_at"], row["kind"])
    return row is not None


# --- runs at once per group: slots in Redis --------------------------------------------------

# A run holds one slot of every group it belongs to, or none: KEYS are the groups (sorted sets of
# run token -> expiry in ms), ARGV token, now, expiry, then each group's limit in KEYS' order.
# Expired slots (a run whose worker died) are dropped first, so a slot cannot outlive its expiry.
TAKE_SLOT = """
local now = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZSCORE', key, ARGV[1]) == false
     and redis.call('ZCARD', key) >= tonumber(ARGV[3 + i]) then
    return 0
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, ARGV[3], ARGV[1])
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, last[2])
end
return 1
"""


@dataclass(frozen=True)
class RunGroup:
    """Runs that may not exceed `limit` at once (all deliveries to one subscription, say):
    `key` names the group in Redis."""

    key: str
    limit: int


async def take_slot(redis: Any, groups: list[RunGroup], token: str, seconds: float) -> bool:
    """Take a slot of every group for the run `token` for at most `seconds` (the longest the run
    can last: its lease), or none when one of them is full. Give it back with `give_back`; a
    worker that dies first leaves it to expire."""
    now_ms = int(utcnow().timestamp() * 1000)
    taken = await redis.eval(
        TAKE_SLOT,
        len(groups),
        *(group.key for group in groups),
        token,
        now_ms,
        now_ms + int(seconds * 1000),
        *(group.limit for group in groups),
    )
    return bool(taken)


async def give_back(redis: Any, groups: list[RunGroup], token: str) -> None:
    async with redis.pipeline(transaction=True) as pipe:
        for group in groups:
            pipe.zrem(group.key, token)
        await pipe.execute()
