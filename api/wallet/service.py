"""The prepaid wallet: a balance row and a ledger of signed amounts, in the tenant schema.

Every change is one UPDATE guarded so the balance never goes below zero (the CHECK constraint
backs it), plus one ledger row, in the caller's tenant transaction.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg

from tenancy.errors import APIError

CREDIT = """
UPDATE wallet SET balance = balance + $1, updated_at = now() WHERE id = 1 RETURNING balance
"""

DEBIT = """
UPDATE wallet SET balance = balance - $1, updated_at = now()
WHERE id = 1 AND balance >= $1
RETURNING balance
"""

INSERT_TRANSACTION = """
INSERT INTO wallet_transactions
    (amount, balance_after, kind, description, reference_type, reference_id)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id
"""

SELECT_BALANCE = "SELECT balance, currency FROM wallet WHERE id = 1"


async def credit(conn: asyncpg.Connection, amount: Decimal, kind: str = "credit",
                 description: str | None = None, reference_type: str | None = None,
                 reference_id: uuid.UUID | None = None) -> Decimal:
    balance: Decimal = await conn.fetchval(CREDIT, amount)
    await conn.execute(INSERT_TRANSACTION, amount, balance, kind, description, reference_type,
                       reference_id)
    return balance


async def debit(conn: asyncpg.Connection, amount: Decimal, kind: str,
                description: str | None = None, reference_type: str | None = None,
                reference_id: uuid.UUID | None = None) -> Decimal:
    """Take `amount` off the balance, or raise 402 insufficient_funds and change nothing."""
    balance = await conn.fetchval(DEBIT, amount)
    if balance is None:
        raise APIError(402, "insufficient_funds", "the wallet balance cannot cover this charge")
    await conn.execute(INSERT_TRANSACTION, -amount, balance, kind, description, reference_type,
                       reference_id)
    return balance  # type: ignore[no-any-return]
