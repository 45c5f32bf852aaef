"""Who is calling: an API key resolved to its organisation and, for sub-account keys, tenant."""

from __future__ import annotations

import hmac
import time
import uuid
from dataclasses import dataclass
from typing import Literal

import asyncpg

from tenancy.keys import hash_key, looks_like_key


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


async def principal_for_key(conn: asyncpg.Connection | asyncpg.Pool,
                           key: str) -> Principal | None:
    if not looks_like_key(key):
        return None
    digest = hash_key(key)
    row = await conn.fetchrow(SELECT_KEY, digest)
    if row is None or not hmac.compare_digest(row["key_hash"], digest):
        return None
    return Principal(
        kind=row["kind"],
        key_id=row["id"],
        organisation_id=row["organisation_id"],
        sub_account_id=row["sub_account_id"],
        schema=row["schema_name"],
    )


class PrincipalCache:
    """Recently resolved keys, kept `ttl` seconds, so a busy key costs no database round trip.

    Only successful lookups are kept, under the key's hash. A revoked key, or one of a suspended
    or deleted sub-account, therefore stops working within `ttl` seconds (0 turns it off).
    """

    def __init__(self, ttl: float, max_entries: int = 10_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: dict[bytes, tuple[float, Principal]] = {}

    async def resolve(self, pool: asyncpg.Pool, key: str) -> Principal | None:
        if self.ttl <= 0 or not looks_like_key(key):
            return await principal_for_key(pool, key)
        digest = hash_key(key)
        now = time.monotonic()
        cached = self._entries.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = await principal_for_key(pool, key)
        if found is None:
            self._entries.pop(digest, None)
            return None
        if len(self._entries) >= self.max_entries:
            self._entries = {d: e for d, e in self._entries.items() if e[0] > now}
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
        self._entries[digest] = (now + self.ttl, found)
        return found


INSERT_KEY = """
INSERT INTO control.api_keys (kind, organisation_id, sub_account_id, key_hash, prefix, name)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id
"""


async def insert_key(conn: asyncpg.Connection, kind: str, organisation_id: uuid.UUID,
                     sub_account_id: uuid.UUID | None, name: str | None = None
                     ) -> tuple[uuid.UUID, str]:
    from tenancy.keys import display_prefix, generate_key

    key = generate_key()
    key_id = await conn.fetchval(INSERT_KEY, kind, organisation_id, sub_account_id,
                                 hash_key(key), display_prefix(key), name)
    return key_id, key
