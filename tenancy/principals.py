"""Who is calling: an API key resolved to its organisation and, for sub-account keys, tenant."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from tenancy.keys import hash_key, key_hashes, looks_like_key


@dataclass(frozen=True)
class Principal:
    kind: Literal["agency", "sub_account"]
    key_id: uuid.UUID
    organisation_id: uuid.UUID
    sub_account_id: uuid.UUID | None = None
    schema: str | None = None


SELECT_KEY = """
SELECT k.id, k.kind, k.key_hash, k.organisation_id, k.sub_account_id, s.schema_name
FROM control.api_keys AS k
JOIN control.organisations AS o ON o.id = k.organisation_id
LEFT JOIN control.sub_accounts AS s ON s.id = k.sub_account_id
WHERE k.key_hash = $1
  AND k.revoked_at IS NULL
  AND (k.sub_account_id IS NULL OR s.status = 'active')
"""


# With SWITCHBOARD_KEY_PEPPER_PREVIOUS set: the key's hash under either pepper.
SELECT_KEY_EITHER_PEPPER = """
SELECT k.id, k.kind, k.key_hash, k.organisation_id, k.sub_account_id, s.schema_name
FROM control.api_keys AS k
JOIN control.organisations AS o ON o.id = k.organisation_id
LEFT JOIN control.sub_accounts AS s ON s.id = k.sub_account_id
WHERE k.key_hash = ANY($1::bytea[])
  AND k.revoked_at IS NULL
  AND (k.sub_account_id IS NULL OR s.status = 'active')
"""

# A key found under the previous pepper is stored under the current one from then on.
REHASH_KEY = "UPDATE control.api_keys SET key_hash = $2 WHERE id = $1 AND key_hash = $3"


async def principal_for_key(conn: asyncpg.Connection | asyncpg.Pool, key: str) -> Principal | None:
    if not looks_like_key(key):
        return None
    digests = key_hashes(key)
    if len(digests) == 1:
        row = await conn.fetchrow(SELECT_KEY, digests[0])
    else:
        row = await conn.fetchrow(SELECT_KEY_EITHER_PEPPER, digests)
    if row is None or not any(hmac.compare_digest(row["key_hash"], d) for d in digests):
        return None
    if row["key_hash"] != digests[0]:
        await conn.execute(REHASH_KEY, row["id"], digests[0], row["key_hash"])
    return Principal(
        kind=row["kind"],
        key_id=row["id"],
        organisation_id=row["organisation_id"],
        sub_account_id=row["sub_account_id"],
        schema=row["schema_name"],
    )


# Statements that make keys stop working (suspend, delete) notify this channel in the same
# transaction; every API process listening on it empties its cache when they commit.
CHANNEL = "switchboard_principals"
HEARTBEAT_SECONDS = 5.0
PROBE_PREFIX = "probe:"
log = logging.getLogger("switchboard.principals")


class PrincipalCache:
    """Recently resolved keys, so a busy key costs no database round trip.

    Only successful lookups are kept, under the key's hash. While `listen` holds its LISTEN
    connection, a change that stops keys (CHANNEL) empties the cache at once, and entries are
    trusted `notified_ttl` seconds; without it (not started, or the connection lost) they are
    trusted only `ttl` seconds, so a revoked key, or one of a suspended or deleted sub-account,
    stops working within that time. `ttl` 0 turns the cache off.
    """

    def __init__(
        self, ttl: float, max_entries: int = 10_000, notified_ttl: float | None = None
    ) -> None:
        self.ttl = ttl
        self.notified_ttl = max(ttl, notified_ttl or 0.0)
        self.max_entries = max_entries
        self.listening = False
        self.listener_pid: int | None = None  # its PostgreSQL backend, while it listens
        self.reconnect_seconds = 1.0
        self._entries: dict[bytes, tuple[float, Principal]] = {}
        # Bumped by every clear: a lookup that a clear overtook is not cached (it may have read
        # a key just before the change that stopped it committed).
        self._generation = 0

    def clear(self) -> None:
        self._generation += 1
        self._entries.clear()

    async def resolve(self, pool: asyncpg.Pool, key: str) -> Principal | None:
        if self.ttl <= 0 or not looks_like_key(key):
            return await principal_for_key(pool, key)
        digest = hash_key(key)
        now = time.monotonic()
        cached = self._entries.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        generation = self._generation
        found = await principal_for_key(pool, key)
        if found is None:
            self._entries.pop(digest, None)
            return None
        if generation != self._generation:
            return found
        if len(self._entries) >= self.max_entries:
            self._entries = {d: e for d, e in self._entries.items() if e[0] > now}
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
        ttl = self.notified_ttl if self.listening else self.ttl
        self._entries[digest] = (now + ttl, found)
        return found

    async def listen(self, url: str, pool: asyncpg.Pool) -> None:
        """Hold a LISTEN connection on CHANNEL (reconnecting after a loss) until cancelled.

        `url` must reach PostgreSQL itself: LISTEN through PgBouncer in transaction mode lands
        on whichever server connection runs it. So the listener proves delivery every
        HEARTBEAT_SECONDS with a probe sent through `pool` (the way real changes come), and
        entries get `notified_ttl` only while the probes arrive."""
        while True:
            try:
                await self._listen_once(url, pool)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - logged, and retried
                log.warning(
                    "principal cache listener failed; keys are trusted %s s until it is back",
                    self.ttl,
                    exc_info=True,
                )
            else:
                log.warning(
                    "principal cache listener connection closed; keys are trusted %s s "
                    "until it is back",
                    self.ttl,
                )
            finally:
                self._stop_listening()
            await asyncio.sleep(self.reconnect_seconds)

    async def _listen_once(self, url: str, pool: asyncpg.Pool) -> None:
        from tenancy.db import asyncpg_dsn

        conn = await asyncpg.connect(asyncpg_dsn(url))
        lost, probed = asyncio.Event(), asyncio.Event()
        probe = ""

        def notified(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            if payload == probe:
                probed.set()
            elif not payload.startswith(PROBE_PREFIX):  # another process's probe: no change
                self.clear()

        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(CHANNEL, notified)
            while not lost.is_set():
                probe, sent = f"{PROBE_PREFIX}{secrets.token_hex(8)}", time.monotonic()
                probed.clear()
                await pool.execute("SELECT pg_notify($1, $2)", CHANNEL, probe)
                # No answer in time: this connection hears nothing (a silent network loss, or
                # PgBouncer in the way). The TimeoutError ends it.
                await asyncio.wait_for(probed.wait(), HEARTBEAT_SECONDS)
                if not self.listening:
                    # Whatever changed while nobody listened: start from an empty cache.
                    self.clear()
                    self.listener_pid = conn.get_server_pid()
                    self.listening = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        lost.wait(), HEARTBEAT_SECONDS - (time.monotonic() - sent)
                    )
        finally:
            self._stop_listening()
            if not conn.is_closed():
                conn.terminate()

    def _stop_listening(self) -> None:
        if self.listening:
            self.listening, self.listener_pid = False, None
            self.clear()  # entries kept for notified_ttl are no longer covered


async def announce_change(conn: asyncpg.Connection | asyncpg.Pool) -> None:
    """Tell every API process to forget cached keys when this transaction commits (for a change
    that stops keys and does not go through tenant_ops, such as a revocation in SQL)."""
    await conn.execute("SELECT pg_notify($1, '')", CHANNEL)


INSERT_KEY = """
INSERT INTO control.api_keys (kind, organisation_id, sub_account_id, key_hash, prefix, name)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id
"""


async def insert_key(
    conn: asyncpg.Connection,
    kind: str,
    organisation_id: uuid.UUID,
    sub_account_id: uuid.UUID | None,
    name: str | None = None,
) -> tuple[uuid.UUID, str]:
    from tenancy.keys import display_prefix, generate_key

    key = generate_key()
    key_id = await conn.fetchval(
        INSERT_KEY, kind, organisation_id, sub_account_id, hash_key(key), display_prefix(key), name
    )
    return key_id, key
