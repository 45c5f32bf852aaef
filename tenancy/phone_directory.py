"""The platform-wide number directory (CONTRACT 9): which sub-account holds each active number.

A number is claimed in the tenant transaction that activates it and freed in the one that
releases it, so the directory and the tenant's `phone_numbers` commit together; the primary key
makes a number held once across every sub-account, also under concurrent purchases or imports.
Inbound SMS and calls find their sub-account here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from tenancy.scope import TenantScope

CLAIM = """
INSERT INTO control.phone_number_directory (phone_number, sub_account_id, phone_number_id)
VALUES ($1, $2, $3)
ON CONFLICT (phone_number) DO NOTHING
RETURNING phone_number
"""

FREE = """
DELETE FROM control.phone_number_directory WHERE phone_number = $1 AND sub_account_id = $2
"""

SELECT_HOLDER = """
SELECT d.sub_account_id, d.phone_number_id, s.schema_name, s.status
FROM control.phone_number_directory AS d
JOIN control.sub_accounts AS s ON s.id = d.sub_account_id
WHERE d.phone_number = $1
"""


@dataclass(frozen=True)
class Holder:
    sub_account_id: uuid.UUID
    phone_number_id: uuid.UUID
    schema_name: str
    active: bool

    def scope(self, pool: asyncpg.Pool) -> TenantScope:
        return TenantScope(pool, self.sub_account_id, self.schema_name)


async def claim(
    conn: asyncpg.Connection,
    phone_number: str,
    sub_account_id: uuid.UUID,
    phone_number_id: uuid.UUID,
) -> bool:
    """Record that the sub-account holds the number; False when another one already does."""
    return await conn.fetchval(CLAIM, phone_number, sub_account_id, phone_number_id) is not None


async def free(conn: asyncpg.Connection, phone_number: str, sub_account_id: uuid.UUID) -> None:
    await conn.execute(FREE, phone_number, sub_account_id)


async def holder(conn: asyncpg.Connection | asyncpg.Pool, phone_number: str) -> Holder | None:
    """Who holds the number (any sub-account status), or None."""
    row = await conn.fetchrow(SELECT_HOLDER, phone_number)
    if row is None:
        return None
    return Holder(
        row["sub_account_id"], row["phone_number_id"], row["schema_name"], row["status"] == "active"
    )
