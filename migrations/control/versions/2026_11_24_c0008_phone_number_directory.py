"""control.phone_number_directory: active numbers, unique platform-wide, backfilled from tenants

Revision ID: c0008
Revises: c0007
Create Date: 2026-11-24 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "c0008"
down_revision: str | None = "c0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Tenant schemas that have a phone_numbers table (a schema still being provisioned may not).
TENANTS_WITH_NUMBERS = """
SELECT s.id, s.schema_name FROM control.sub_accounts AS s
WHERE to_regclass(quote_ident(s.schema_name) || '.phone_numbers') IS NOT NULL
ORDER BY s.created_at, s.id
"""


def upgrade() -> None:
    op.create_table(
        "phone_number_directory",
        sa.Column("phone_number", sa.Text(), nullable=False),
        sa.Column("sub_account_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("phone_number_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column(
            "created_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["sub_account_id"],
            ["control.sub_accounts.id"],
            name=op.f("fk_phone_number_directory_sub_account_id_sub_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("phone_number", name=op.f("pk_phone_number_directory")),
        schema="control",
    )
    op.create_index(
        op.f("ix_phone_number_directory_sub_account_id"),
        "phone_number_directory",
        ["sub_account_id"],
        unique=False,
        schema="control",
    )
    # Backfill: every tenant's active numbers. A number two sub-accounts both hold (possible
    # before this revision) stays with the older sub-account; the other keeps its row but
    # receives nothing inbound until one of them releases it.
    bind = op.get_bind()
    for tenant in bind.execute(sa.text(TENANTS_WITH_NUMBERS)).mappings().all():
        schema = tenant["schema_name"].replace('"', '""')
        bind.execute(
            sa.text(
                "INSERT INTO control.phone_number_directory (phone_number, sub_account_id, phone_number_id, created_at) "
                f'SELECT phone_number, :sub_account_id, id, created_at FROM "{schema}".phone_numbers '
                "WHERE is_active ORDER BY created_at, id "
                "ON CONFLICT (phone_number) DO NOTHING"
            ),
            {"sub_account_id": tenant["id"]},
        )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_phone_number_directory_sub_account_id"),
        table_name="phone_number_directory",
        schema="control",
    )
    op.drop_table("phone_number_directory", schema="control")
