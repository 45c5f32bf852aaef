"""Invoice rules: numbering, totals, the PATCH state table, payment links and marking paid.

Every change runs in one tenant transaction; PATCH locks the invoice row (SELECT ... FOR UPDATE)
before it reads, so two concurrent changes apply one after the other and neither is lost.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import asyncpg

from api import events
from api.invoices.schemas import CreateInvoiceRequest, LineItem, UpdateInvoiceRequest
from api.types import parse_uuid
from tenancy.db import fetch_newest_page, fetch_one_or_404
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

CENT = Decimal("0.01")
MAX_AMOUNT = Decimal("9999999999.99")  # numeric(12,2)
PAYMENT_LINK_TTL = timedelta(days=30)
EDITABLE = ("contact_id", "items", "due_date", "notes", "status")
NOT_NULL = ("contact_id", "items", "due_date", "status")

COLUMNS = """id, invoice_number, contact_id, quote_id, amount, status, issued_at, due_date,
paid_at, payment_method, notes, items, payment_url, payment_link_expires_at, created_at,
updated_at"""

SELECT_CONTACT = "SELECT 1 FROM contacts WHERE id = $1"

NEXT_NUMBER = """
INSERT INTO invoice_counter AS c (id, last_number) VALUES (1, 1)
ON CONFLICT (sub_account_id, id) DO UPDATE SET last_number = c.last_number + 1
RETURNING last_number
"""

INSERT_INVOICE = f"""
INSERT INTO invoices (invoice_number, contact_id, quote_id, amount, due_date, notes, items)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING {COLUMNS}
"""

SELECT_INVOICE = f"SELECT {COLUMNS} FROM invoices WHERE id = $1"

SELECT_INVOICE_FOR_UPDATE = SELECT_INVOICE + " FOR UPDATE"

SELECT_STATUS = "SELECT status FROM invoices WHERE id = $1"

UPDATE_INVOICE = f"""
UPDATE invoices
SET contact_id = $2, items = $3, amount = $4, due_date = $5, notes = $6, status = $7,
    payment_url = $8, payment_link_expires_at = $9, updated_at = now()
WHERE id = $1 AND status = $10
RETURNING {COLUMNS}
"""

SET_PAYMENT_LINK = f"""
UPDATE invoices
SET payment_url = $2, payment_link_expires_at = now() + $3::interval, updated_at = now()
WHERE id = $1 AND status = 'pending'
RETURNING {COLUMNS}
"""

MARK_PAID = f"""
UPDATE invoices
SET status = 'paid', paid_at = now(), payment_method = $2, updated_at = now()
WHERE id = $1 AND status = 'pending'
RETURNING {COLUMNS}
"""


def invoice_total(items: list[LineItem]) -> Decimal:
    """Sum of unit price x quantity, rounded half-up to cents (3 x 0.335 = 1.01)."""
    total = sum((item.amount * item.quantity for item in items), Decimal(0))
    rounded = total.quantize(CENT, rounding=ROUND_HALF_UP)
    if rounded > MAX_AMOUNT:
        raise APIError(
            400,
            "validation_error",
            "the invoice total is too large",
            details=[
                {
                    "field": "items",
                    "message": f"total must not exceed {MAX_AMOUNT}",
                    "type": "less_than_equal",
                }
            ],
        )
    return rounded


def stored_items(items: list[LineItem]) -> list[dict[str, Any]]:
    # A unit price has at most 4 decimals, so its float's shortest repr is the exact decimal.
    return [
        {"item": item.item, "quantity": item.quantity, "amount": float(item.amount)}
        for item in items
    ]


def blank_to_none(notes: str | None) -> str | None:
    return notes if notes is not None and notes.strip() else None


async def require_contact(conn: asyncpg.Connection, contact_id: uuid.UUID) -> None:
    if await conn.fetchval(SELECT_CONTACT, contact_id) is None:
        raise not_found("contact")


def invoice_out(row: asyncpg.Record) -> dict[str, Any]:
    return dict(row)


async def create_invoice(scope: TenantScope, data: CreateInvoiceRequest) -> dict[str, Any]:
    contact_id = parse_uuid(data.contact_id, "contact_id")
    quote_id = parse_uuid(data.quote_id, "quote_id") if data.quote_id is not None else None
    amount = invoice_total(data.items)
    try:
        async with scope.transaction() as conn:
            await require_contact(conn, contact_id)
            # The counter row stays locked until commit; a failed create rolls its number back.
            number = await conn.fetchval(NEXT_NUMBER)
            row = await conn.fetchrow(
                INSERT_INVOICE,
                f"INV-{number:06d}",
                contact_id,
                quote_id,
                amount,
                data.due_date,
                blank_to_none(data.notes),
                stored_items(data.items),
            )
    except asyncpg.ForeignKeyViolationError:
        raise not_found("contact") from None  # deleted between the check and the insert
    return invoice_out(row)


async def get_invoice(scope: TenantScope, invoice_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_INVOICE, invoice_id, what="invoice")
    return invoice_out(row)


async def list_invoices(
    scope: TenantScope, status: str | None, contact_id: uuid.UUID | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of invoices, newest first, each as GET /invoices/{id} shows it."""
    async with scope.transaction() as conn:
        return await fetch_newest_page(
            conn,
            "invoices",
            COLUMNS,
            [("status = $?", status), ("contact_id = $?", contact_id)],
            limit,
            offset,
        )


def sent_fields(data: UpdateInvoiceRequest) -> set[str]:
    """The fields the body sent; null only where the spec allows it (notes).

    So past this check a field other than notes is None exactly when it was not sent.
    """
    sent = data.model_fields_set & set(EDITABLE)
    nulls = [field for field in NOT_NULL if field in sent and getattr(data, field) is None]
    if nulls:
        raise APIError(
            400,
            "validation_error",
            "invalid request",
            details=[
                {"field": field, "message": "must not be null", "type": "null"} for field in nulls
            ],
        )
    return sent


def check_transition(current: asyncpg.Record, data: UpdateInvoiceRequest) -> None:
    if current["status"] != "paid":
        return
    if data.status in ("pending", "void"):
        raise APIError(
            409, "invoice_paid", f"a paid invoice cannot be set to {data.status}; refund it instead"
        )
    if data.items is not None:
        raise APIError(409, "invoice_paid", "the items of a paid invoice cannot change")


def merged(
    current: asyncpg.Record, data: UpdateInvoiceRequest, contact_id: uuid.UUID | None
) -> tuple[dict[str, Any], bool]:
    """The invoice's new values, and whether a changed amount removed its payment link."""
    values = {
        key: current[key]
        for key in (
            "contact_id",
            "items",
            "amount",
            "due_date",
            "notes",
            "status",
            "payment_url",
            "payment_link_expires_at",
        )
    }
    if contact_id is not None:
        values["contact_id"] = contact_id
    if data.due_date is not None:
        values["due_date"] = data.due_date
    if data.status is not None:
        values["status"] = data.status
    if "notes" in data.model_fields_set:  # notes may be sent as null: it clears them
        values["notes"] = blank_to_none(data.notes)
    cleared = False
    if data.items is not None:
        values["items"] = stored_items(data.items)
        values["amount"] = invoice_total(data.items)
        if values["amount"] != current["amount"]:
            cleared = current["payment_url"] is not None
            values["payment_url"] = values["payment_link_expires_at"] = None
    return values, cleared


async def update_invoice(
    scope: TenantScope, invoice_id: uuid.UUID, data: UpdateInvoiceRequest
) -> tuple[dict[str, Any], bool]:
    """Apply the fields sent; answer the invoice and whether its payment link was cleared."""
    sent = sent_fields(data)
    contact_id = parse_uuid(data.contact_id, "contact_id") if data.contact_id is not None else None
    if not sent:
        raise APIError(400, "nothing_to_update", "send at least one of " + ", ".join(EDITABLE))
    try:
        async with scope.transaction() as conn:
            current = await fetch_one_or_404(
                conn, SELECT_INVOICE_FOR_UPDATE, invoice_id, what="invoice"
            )
            if contact_id is not None:
                await require_contact(conn, contact_id)
            check_transition(current, data)
            values, cleared = merged(current, data, contact_id)
            row = await conn.fetchrow(
                UPDATE_INVOICE,
                invoice_id,
                values["contact_id"],
                values["items"],
                values["amount"],
                values["due_date"],
                values["notes"],
                values["status"],
                values["payment_url"],
                values["payment_link_expires_at"],
                current["status"],
            )
    except asyncpg.ForeignKeyViolationError:
        raise not_found("contact") from None
    if row is None:  # unreachable while the row lock holds; kept as the SQL-level guard
        raise APIError(409, "invoice_state_conflict", "the invoice changed meanwhile; retry")
    return invoice_out(row), cleared


async def refuse_unless_pending(
    conn: asyncpg.Connection, invoice_id: uuid.UUID, action: str
) -> None:
    status = await conn.fetchval(SELECT_STATUS, invoice_id)
    if status is None:
        raise not_found("invoice")
    if status == "paid":
        raise APIError(409, "invoice_paid", f"the invoice is already paid; cannot {action}")
    raise APIError(
        409, "invoice_not_payable", f"the invoice is {status}; only a pending invoice can {action}"
    )


async def create_payment_link(
    scope: TenantScope, invoice_id: uuid.UUID, public_url: str
) -> dict[str, Any]:
    """A fresh payment link (replacing any earlier one) for a pending invoice."""
    url = f"{public_url.rstrip('/')}/pay/{secrets.token_urlsafe(24)}"
    async with scope.transaction() as conn:
        row = await conn.fetchrow(SET_PAYMENT_LINK, invoice_id, url, PAYMENT_LINK_TTL)
        if row is None:
            await refuse_unless_pending(conn, invoice_id, "get a payment link")
    return invoice_out(row)


async def mark_paid(
    scope: TenantScope, invoice_id: uuid.UUID, payment_method: str
) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await conn.fetchrow(MARK_PAID, invoice_id, payment_method)
        if row is None:
            await refuse_unless_pending(conn, invoice_id, "be marked paid")
        await events.emit(
            conn,
            "invoice.paid",
            {"sub_account_id": str(scope.sub_account_id), "invoice": invoice_out(row)},
        )
    return invoice_out(row)
