"""Contacts and what hangs off them: companies, notes, custom fields, appointments."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import created_at, tenant_metadata, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)

companies = sa.Table(
    "companies",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    created_at(),
    updated_at(),
)

contacts = sa.Table(
    "contacts",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text),
    sa.Column("first_name", sa.Text),
    sa.Column("last_name", sa.Text),
    sa.Column("email", sa.Text),
    sa.Column("phone", sa.Text),
    sa.Column("address", sa.Text),
    sa.Column("tags", pg.ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'::text[]")),
    sa.Column("lead_source", sa.Text, nullable=False, server_default="inbound_webhook"),
    sa.Column("company_id", UUID, sa.ForeignKey("companies.id", ondelete="SET NULL")),
    # A member of control.users; no foreign key across schemas (Citus schema-based sharding).
    sa.Column("assigned_user_id", UUID),
    sa.Column("status", sa.Text),
    created_at(),
    updated_at(),
    sa.CheckConstraint("email = lower(email)", name="email_lower"),
    sa.Index("uq_contacts_email", "email", unique=True),
    sa.Index("uq_contacts_phone", "phone", unique=True),
    sa.Index("ix_contacts_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
    sa.Index("ix_contacts_tags", "tags", postgresql_using="gin"),
)
