"""Tenant tables every sub-account gets from the start: the prepaid wallet and its ledger."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import MONEY, created_at, tenant_metadata, updated_at, uuid_pk

wallet = sa.Table(
    "wallet",
    tenant_metadata,
    # A single row per tenant schema.
    sa.Column("id", sa.SmallInteger, primary_key=True, server_default="1"),
    sa.Column("balance", MONEY, nullable=False, server_default="0"),
    sa.Column("currency", sa.Text, nullable=False, server_default="USD"),
    created_at(),
    updated_at(),
    sa.CheckConstraint("id = 1", name="single_row"),
    sa.CheckConstraint("balance >= 0", name="balance_not_negative"),
)

wallet_transactions = sa.Table(
    "wallet_transactions",
    tenant_metadata,
    uuid_pk(),
    sa.Column("amount", MONEY, nullable=False),
    sa.Column("balance_after", MONEY, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("description", sa.Text),
    sa.Column("reference_type", sa.Text),
    sa.Column("reference_id", pg.UUID(as_uuid=True)),
    # posted: applied to the balance; declined: a debit the balance could not cover (no effect).
    sa.Column("status", sa.Text, nullable=False, server_default="posted"),
    created_at(),
    sa.CheckConstraint("status IN ('posted', 'declined')", name="status"),
    sa.Index("ix_wallet_transactions_created_at", sa.text("created_at DESC")),
)
