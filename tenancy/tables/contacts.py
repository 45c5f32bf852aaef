"""Contacts and what hangs off them: companies, notes, custom fields (appointments are in
tenancy/tables/calendars.py)."""

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
    sa.Index("ix_companies_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
)

# The expressions of the 2-character search indexes; the search's conditions use them as written.
TEXT_BIGRAMS = "(public.switchboard_bigrams(lower(name)) || public.switchboard_bigrams(email))"
PHONE_BIGRAMS = "public.switchboard_bigrams(phone)"
# Every search reads a GIN index's whole pending list (new entries not yet merged; 4 MB by
# default, ~15 ms a search at 100,000 contacts until autovacuum merges it): a smaller one keeps
# searches fast after a bulk import, while inserts are still merged in batches (t0010).
SEARCH_GIN = {"gin_pending_list_limit": 256}

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
    # Values live on the row itself, so a contact and its values are saved in one statement.
    sa.Column(
        "custom_field_values", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")
    ),
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
    # The search's `q` (CONTRACT 7): substring matches through pg_trgm (in schema public).
    # Email is stored lowercased (the check below), so uq_contacts_email serves `email=`.
    sa.Index(
        "ix_contacts_name_trgm",
        "name",
        postgresql_using="gin",
        postgresql_ops={"name": "gin_trgm_ops"},
        postgresql_with=SEARCH_GIN,
    ),
    sa.Index(
        "ix_contacts_email_trgm",
        "email",
        postgresql_using="gin",
        postgresql_ops={"email": "gin_trgm_ops"},
        postgresql_with=SEARCH_GIN,
    ),
    sa.Index(
        "ix_contacts_phone_trgm",
        "phone",
        postgresql_using="gin",
        postgresql_ops={"phone": "gin_trgm_ops"},
        postgresql_with=SEARCH_GIN,
    ),
    # A 2-character `q` gives pg_trgm nothing to look up: these index every 2-character piece
    # (public.switchboard_bigrams, set up with pg_trgm by the control migrations).
    sa.Index(
        "ix_contacts_text_bigrams",
        sa.text(TEXT_BIGRAMS),
        postgresql_using="gin",
        postgresql_with=SEARCH_GIN,
    ),
    sa.Index(
        "ix_contacts_phone_bigrams",
        sa.text(PHONE_BIGRAMS),
        postgresql_using="gin",
        postgresql_with=SEARCH_GIN,
    ),
    sa.Index("ix_contacts_company_id", "company_id"),
)

FIELD_TYPES = ("text", "number", "boolean", "date", "select", "multi_select")

custom_fields = sa.Table(
    "custom_fields",
    tenant_metadata,
    uuid_pk(),
    sa.Column("key", sa.Text, nullable=False, unique=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("field_type", sa.Text, nullable=False),
    sa.Column("options", pg.ARRAY(sa.Text)),
    # Mirrored from an external CRM: readable, never written through this API.
    sa.Column("read_only", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("is_active", sa.Boolean, nullable=False, server_default=sa.true()),
    created_at(),
    updated_at(),
    sa.CheckConstraint(
        "field_type IN ('text', 'number', 'boolean', 'date', 'select', 'multi_select')",
        name="field_type",
    ),
)

notes = sa.Table(
    "notes",
    tenant_metadata,
    uuid_pk(),
    sa.Column("contact_id", UUID, sa.ForeignKey("contacts.id", ondelete="CASCADE"), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    # The agent that wrote it (after a call); agents live in another module, so no foreign key.
    sa.Column("agent_id", UUID),
    sa.Column("deleted_at", sa.TIMESTAMP(timezone=True)),
    created_at(),
    updated_at(),
    sa.CheckConstraint("char_length(content) BETWEEN 1 AND 5000", name="content_length"),
    sa.Index(
        "ix_notes_contact_id_created_at",
        "contact_id",
        sa.text("created_at DESC"),
        postgresql_where=sa.text("deleted_at IS NULL"),
    ),
)

# One row per contact and channel that has been set; no row reads `unknown` (sending allowed).
contact_consents = sa.Table(
    "contact_consents",
    tenant_metadata,
    sa.Column("contact_id", UUID, sa.ForeignKey("contacts.id", ondelete="CASCADE"), nullable=False),
    sa.Column("channel", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    updated_at(),
    sa.PrimaryKeyConstraint("contact_id", "channel"),
    sa.CheckConstraint("channel IN ('sms', 'email', 'call')", name="channel"),
    sa.CheckConstraint("status IN ('granted', 'revoked')", name="status"),
    sa.CheckConstraint(
        "source IN ('api', 'inbound_keyword', 'unsubscribe_link', 'campaign_unsubscribe_header')",
        name="source",
    ),
)
