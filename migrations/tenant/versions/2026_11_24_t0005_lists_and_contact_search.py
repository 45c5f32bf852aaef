"""lists and contact search: trigram indexes of contacts' name, email and phone (pg_trgm, set up
once per database in schema public by the control migrations' environment); newest-first
indexes of campaigns, invoices, calls and number pools

Revision ID: t0005
Revises: t0008 (built beside t0006-t0008 and placed after them at the merge; ids are names, the chain is the order)
Create Date: 2026-11-24 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "t0005"
down_revision: str | None = "t0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIGRAM = ("name", "email", "phone")
NEWEST_FIRST = ("campaigns", "invoices", "calls", "number_pools")


def upgrade() -> None:
    for column in TRIGRAM:
        op.create_index(
            f"ix_contacts_{column}_trgm",
            "contacts",
            [column],
            unique=False,
            postgresql_using="gin",
            postgresql_ops={column: "gin_trgm_ops"},
        )
    for table in NEWEST_FIRST:
        op.create_index(
            f"ix_{table}_created_at",
            table,
            [sa.text("created_at DESC"), sa.text("id DESC")],
            unique=False,
        )


def downgrade() -> None:
    for table in NEWEST_FIRST:
        op.drop_index(f"ix_{table}_created_at", table_name=table)
    for column in TRIGRAM:
        op.drop_index(f"ix_contacts_{column}_trgm", table_name="contacts")
