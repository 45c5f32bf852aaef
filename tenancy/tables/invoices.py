"""Invoices (line items as jsonb) and the per-sub-account counter behind INV-000001 numbers."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import MONEY, created_at, tenant_metadata, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)

invoices = sa.Table(
    "invoices",
    tenant_metadata,
    uuid_pk(),
    sa.Column("invoice_number", sa.Text, nullable=False),
    # NO ACTION: deleting a contact that is still billed fails (409 contact_referenced).
    sa.Column("contact_id", UUID, sa.ForeignKey("contacts.id"), nullable=False),
    # Quotes are not part of this product yet: the id is kept as given, without a reference.
    sa.Column("quote_id", UUID),
    sa.Column("amount", MONEY, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="pending"),
    sa.Column(
        "issued_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")
    ),
    sa.Column("due_date", sa.Date, nullable=False),
    sa.Column("paid_at", sa.TIMESTAMP(timezone=True)),
    sa.Column("payment_method", sa.Text),
    sa.Column("notes", sa.Text),
    # [{"item": text, "quantity": integer, "amount": unit price}], 1 to 200 entries.
    sa.Column("items", pg.JSONB, nullable=False),
    sa.Column("payment_url", sa.Text),
    sa.Column("payment_link_expires_at", sa.TIMESTAMP(timezone=True)),
    created_at(),
    updated_at(),
    sa.CheckConstraint("status IN ('pending', 'void', 'refunded', 'paid')", name="status"),
    sa.CheckConstraint("amount >= 0", name="amount_not_negative"),
    sa.CheckConstraint("jsonb_typeof(items) = 'array'", name="items_array"),
    sa.CheckConstraint("status <> 'paid' OR paid_at IS NOT NULL", name="paid_has_paid_at"),
    sa.Index("uq_invoices_invoice_number", "invoice_number", unique=True),
    sa.Index("ix_invoices_contact_id", "contact_id"),
    sa.Index("ix_invoices_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
)

# One row per tenant schema, created by the first invoice; its row lock serialises numbering,
# and taking a number in the creating transaction means a failed create leaves no gap.
invoice_counter = sa.Table(
    "invoice_counter",
    tenant_metadata,
    sa.Column("id", sa.SmallInteger, primary_key=True, server_default="1"),
    sa.Column("last_number", sa.BigInteger, nullable=False, server_default="0"),
    sa.CheckConstraint("id = 1", name="single_row"),
)
