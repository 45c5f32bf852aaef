"""The prepaid wallet: a balance row and a ledger of signed amounts, in the tenant schema.

Every change is one UPDATE guarded so the balance never goes below zero (the CHECK constraint
backs it), plus one ledger row, in the caller's tenant transaction. A debit the balance cannot
cover changes nothing and is written to the ledger as a `declined` row.
"""

from __future__ import annotations

import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

import asyncpg

from tenancy.db import fetch_page
from tenancy.errors import APIError
from tenancy.scope import TenantScope

# The balance column holds up to MAX_BALANCE (numeric(12, 2)): a credit past it is refused
# (400), not an overflow in the database.
MAX_BALANCE = Decimal("9999999999.99")

CREDIT = """
UPDATE wallet SET balance = balance + $1, updated_at = now()
WHERE id = 1 AND balance + $1 <= 9999999999.99
RETURNING balance
"""

DEBIT = """
UPDATE wallet SET balance = balance - $1, updated_at = now()
WHERE id = 1 AND balance >= $1
RETURNING balance
"""

INSERT_TRANSACTION = """
INSERT INTO wallet_transactions
    (amount, balance_after, kind, description, reference_type, reference_id, status)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING id
"""

SELECT_BALANCE = "SELECT balance, currency FROM wallet WHERE id = 1"

SELECT_BALANCE_ONLY = "SELECT balance FROM wallet WHERE id = 1"

SELECT_TRANSACTIONS = """
SELECT id, amount, balance_after, kind, status, description, reference_type, reference_id,
       created_at, count(*) OVER () AS total
FROM wallet_transactions
ORDER BY created_at DESC, id DESC
LIMIT $1 OFFSET $2
"""

COUNT_TRANSACTIONS = "SELECT count(*) FROM wallet_transactions"

SELECT_REBILLING = "SELECT rebilling FROM control.sub_accounts WHERE id = $1"

CENT = Decimal("0.01")


async def plan_price(scope: TenantScope, item: str) -> Decimal:
    """The price the agency's plan rebills for one `item` (`call_per_minute`,
    `sms_per_message`, ...) to this sub-account; 0 when the plan sets none."""
    rebilling = await scope.pool.fetchval(SELECT_REBILLING, scope.sub_account_id)
    return as_price((rebilling or {}).get(item))


def as_price(value: Any) -> Decimal:
    """A rebilling price as money; anything unusable (absent, not a number, not positive)
    counts as free."""
    try:
        price = Decimal(str(value)).quantize(CENT)
    except (InvalidOperation, ValueError):
        return Decimal("0.00")
    return price if price.is_finite() and price > 0 else Decimal("0.00")


class InsufficientFunds(APIError):
    """402 insufficient_funds: the balance cannot cover a debit; the balance is unchanged."""

    def __init__(self, amount: Decimal, balance: Decimal) -> None:
        super().__init__(402, "insufficient_funds", "the wallet balance cannot cover this charge")
        self.amount = amount
        self.balance = balance


def _not_negative(amount: Decimal) -> None:
    # A negative debit would be a credit in disguise: a programming error, not a client's.
    if amount < 0:
        raise ValueError("wallet amounts are not negative; use credit or debit")


async def credit(
    conn: asyncpg.Connection,
    amount: Decimal,
    kind: str = "credit",
    description: str | None = None,
    reference_type: str | None = None,
    reference_id: uuid.UUID | None = None,
) -> Decimal:
    _not_negative(amount)
    balance: Decimal | None = await conn.fetchval(CREDIT, amount)
    if balance is None:
        raise APIError(
            400,
            "validation_error",
            f"the credit would take the balance past {MAX_BALANCE}",
            details=[
                {
                    "field": "amount",
                    "message": f"the balance would exceed {MAX_BALANCE}",
                    "type": "less_than_equal",
                }
            ],
        )
    await conn.execute(
        INSERT_TRANSACTION,
        amount,
        balance,
        kind,
        description,
        reference_type,
        reference_id,
        "posted",
    )
    return balance


async def debit(
    conn: asyncpg.Connection,
    amount: Decimal,
    kind: str,
    description: str | None = None,
    reference_type: str | None = None,
    reference_id: uuid.UUID | None = None,
) -> Decimal:
    """Take `amount` off the balance, or record a declined row and raise InsufficientFunds.

    The declined row is written in the caller's transaction: a caller that handles the refusal
    and commits (a campaign pausing) keeps it; a caller that lets the 402 roll its transaction
    back may keep a record with `record_declined` in a transaction of its own.
    """
    _not_negative(amount)
    balance = await conn.fetchval(DEBIT, amount)
    if balance is None:
        current: Decimal = await conn.fetchval(SELECT_BALANCE_ONLY)
        await conn.execute(
            INSERT_TRANSACTION,
            -amount,
            current,
            kind,
            description,
            reference_type,
            reference_id,
            "declined",
        )
        raise InsufficientFunds(amount, current)
    await conn.execute(
        INSERT_TRANSACTION,
        -amount,
        balance,
        kind,
        description,
        reference_type,
        reference_id,
        "posted",
    )
    return balance  # type: ignore[no-any-return]


async def record_declined(
    scope: TenantScope,
    amount: Decimal,
    kind: str,
    description: str | None = None,
    reference_type: str | None = None,
    reference_id: uuid.UUID | None = None,
) -> None:
    """Write a declined debit in a transaction of its own (after the caller's rolled back)."""
    async with scope.transaction() as conn:
        current = await conn.fetchval(SELECT_BALANCE_ONLY)
        await conn.execute(
            INSERT_TRANSACTION,
            -amount,
            current,
            kind,
            description,
            reference_type,
            reference_id,
            "declined",
        )


async def wallet_with_transactions(
    scope: TenantScope, limit: int, offset: int
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The balance and one page of the ledger, newest first."""
    async with scope.transaction() as conn:
        wallet = await conn.fetchrow(SELECT_BALANCE)
        items, total = await fetch_page(
            conn, SELECT_TRANSACTIONS, COUNT_TRANSACTIONS, limit, offset
        )
    return dict(wallet), items, total
