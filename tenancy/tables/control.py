"""Tables of the control schema: organisations, plans, sub-accounts, keys, users, invitations."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import control_metadata, created_at, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)
JSONB = pg.JSONB()

organisations = sa.Table(
    "organisations",
    control_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("plan_type", sa.Text, nullable=False),
    sa.Column("is_active", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("max_sub_accounts", sa.Integer, nullable=False, server_default="100"),
    # Applied to a sub-account created without a plan.
    sa.Column("default_max_users", sa.Integer, nullable=False, server_default="25"),
    sa.Column("default_rebilling", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    created_at(),
    updated_at(),
    sa.CheckConstraint("plan_type IN ('white_label', 'saas', 'standard')", name="plan_type"),
    sa.CheckConstraint("max_sub_accounts >= 0", name="max_sub_accounts"),
)

email_configs = sa.Table(
    "email_configs",
    control_metadata,
    sa.Column(
        "organisation_id",
        UUID,
        sa.ForeignKey("organisations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("port", sa.Integer, nullable=False),
    sa.Column("username", sa.Text),
    sa.Column("password", sa.Text),
    sa.Column("from_address", sa.Text, nullable=False),
    sa.Column("starttls", sa.Boolean, nullable=False, server_default=sa.false()),
    created_at(),
    updated_at(),
)

plans = sa.Table(
    "plans",
    control_metadata,
    uuid_pk(),
    sa.Column(
        "organisation_id",
        UUID,
        sa.ForeignKey("organisations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("slug", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("max_users", sa.Integer),
    sa.Column("features", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("rebilling", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    # Calls of one sub-account in progress at once; more wait queued (CONTRACT 6).
    sa.Column("max_concurrent_calls", sa.Integer, nullable=False, server_default="10"),
    created_at(),
    updated_at(),
    sa.UniqueConstraint("organisation_id", "slug"),
    sa.CheckConstraint("max_concurrent_calls BETWEEN 1 AND 1000", name="max_concurrent_calls"),
)

sub_accounts = sa.Table(
    "sub_accounts",
    control_metadata,
    uuid_pk(),
    sa.Column(
        "organisation_id",
        UUID,
        sa.ForeignKey("organisations.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("slug", sa.Text, nullable=False, unique=True),
    sa.Column("schema_name", sa.Text, nullable=False, unique=True),
    sa.Column("plan_id", UUID, sa.ForeignKey("plans.id", ondelete="SET NULL")),
    sa.Column("max_users", sa.Integer),
    sa.Column("features", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("rebilling", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("timezone", sa.Text, nullable=False, server_default="UTC"),
    sa.Column("crm_location_id", sa.Text),
    sa.Column("crm_connected", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("crm_error", sa.Text),
    sa.Column("status", sa.Text, nullable=False, server_default="active"),
    # Alembic revision of the tenant schema, written in the migrating transaction:
    # lets `switchboard migrate` find the schemas behind head with one query.
    sa.Column("schema_version", sa.Text),
    # Set by `switchboard tenants delete`: keys stop at once, the schema goes after purge_after.
    sa.Column("deleted_at", sa.TIMESTAMP(timezone=True)),
    sa.Column("purge_after", sa.TIMESTAMP(timezone=True)),
    created_at(),
    updated_at(),
    sa.CheckConstraint("status IN ('active', 'suspended', 'deleted')", name="status"),
    sa.CheckConstraint("(status = 'deleted') = (purge_after IS NOT NULL)", name="purge_after"),
    sa.Index(
        "ix_sub_accounts_purge_after", "purge_after", postgresql_where=sa.text("status = 'deleted'")
    ),
)

api_keys = sa.Table(
    "api_keys",
    control_metadata,
    uuid_pk(),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column(
        "organisation_id",
        UUID,
        sa.ForeignKey("organisations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column(
        "sub_account_id", UUID, sa.ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    ),
    sa.Column("key_hash", sa.LargeBinary, nullable=False, unique=True),
    sa.Column("prefix", sa.Text, nullable=False),
    sa.Column("name", sa.Text),
    created_at(),
    sa.Column("revoked_at", sa.TIMESTAMP(timezone=True)),
    sa.CheckConstraint(
        "(kind = 'agency' AND sub_account_id IS NULL)"
        " OR (kind = 'sub_account' AND sub_account_id IS NOT NULL)",
        name="kind_scope",
    ),
)

users = sa.Table(
    "users",
    control_metadata,
    uuid_pk(),
    sa.Column("email", sa.Text, nullable=False, unique=True),
    sa.Column("first_name", sa.Text),
    sa.Column("last_name", sa.Text),
    sa.Column("phone", sa.Text),
    created_at(),
    updated_at(),
    sa.CheckConstraint("email = lower(email)", name="email_lower"),
)

ROLES = ("sub_account_owner", "sub_account_admin", "sub_account_user")
_ROLE_CHECK = "role IN ('sub_account_owner', 'sub_account_admin', 'sub_account_user')"

memberships = sa.Table(
    "memberships",
    control_metadata,
    uuid_pk(),
    sa.Column("user_id", UUID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column(
        "sub_account_id",
        UUID,
        sa.ForeignKey("sub_accounts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("is_active", sa.Boolean, nullable=False, server_default=sa.true()),
    created_at(),
    updated_at(),
    sa.UniqueConstraint("sub_account_id", "user_id"),
    sa.CheckConstraint(_ROLE_CHECK, name="role"),
)

invitations = sa.Table(
    "invitations",
    control_metadata,
    uuid_pk(),
    sa.Column(
        "sub_account_id", UUID, sa.ForeignKey("sub_accounts.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("email", sa.Text, nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("first_name", sa.Text),
    sa.Column("last_name", sa.Text),
    sa.Column("phone", sa.Text),
    sa.Column("token_hash", sa.LargeBinary, nullable=False, unique=True),
    sa.Column("expires_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("accepted_at", sa.TIMESTAMP(timezone=True)),
    sa.Column("accepted_user_id", UUID, sa.ForeignKey("users.id", ondelete="SET NULL")),
    created_at(),
    updated_at(),
    sa.CheckConstraint(_ROLE_CHECK, name="role"),
    sa.CheckConstraint("email = lower(email)", name="email_lower"),
    # One open invitation per address and sub-account: a repeat refreshes it.
    sa.Index(
        "uq_invitations_open",
        "sub_account_id",
        "email",
        unique=True,
        postgresql_where=sa.text("accepted_at IS NULL"),
    ),
)

# Active phone numbers are unique platform-wide (CONTRACT 9): the sub-account holding each one.
# Written in the tenant transaction that activates or releases the number; inbound SMS and
# calls find their sub-account here.
phone_number_directory = sa.Table(
    "phone_number_directory",
    control_metadata,
    sa.Column("phone_number", sa.Text, primary_key=True),
    sa.Column(
        "sub_account_id",
        UUID,
        sa.ForeignKey("sub_accounts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("phone_number_id", UUID, nullable=False),
    created_at(),
)
