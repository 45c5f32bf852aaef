"""control.due_work: a terminal `failed` state (status, failures, failed_at)

Revision ID: c0006
Revises: c0005
Create Date: 2026-11-24 05:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c0006"
down_revision: str | None = "c0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "due_work",
        sa.Column("status", sa.Text(), server_default="pending", nullable=False),
        schema="control",
    )
    op.add_column(
        "due_work",
        sa.Column("failures", sa.Integer(), server_default="0", nullable=False),
        schema="control",
    )
    op.add_column(
        "due_work",
        sa.Column("failed_at", sa.TIMESTAMP(timezone=True), nullable=True),
        schema="control",
    )
    op.create_index(
        "ix_due_work_failed_at",
        "due_work",
        ["failed_at"],
        unique=False,
        schema="control",
        postgresql_where=sa.text("status = 'failed'"),
    )
    # Autogenerate does not compare CHECK constraints: written by hand.
    op.create_check_constraint(
        op.f("ck_due_work_status"), "due_work", "status IN ('pending', 'failed')", schema="control"
    )
    op.create_check_constraint(
        op.f("ck_due_work_failed_at"),
        "due_work",
        "(status = 'failed') = (failed_at IS NOT NULL)",
        schema="control",
    )


def downgrade() -> None:
    # Refuses while failed rows remain (they would run again unasked): retry or delete them first.
    op.execute("""
        DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM control.due_work WHERE status = 'failed') THEN
                RAISE EXCEPTION 'control.due_work holds failed rows: retry or delete them first';
            END IF;
        END $$
    """)
    op.drop_constraint(op.f("ck_due_work_failed_at"), "due_work", schema="control", type_="check")
    op.drop_constraint(op.f("ck_due_work_status"), "due_work", schema="control", type_="check")
    op.drop_index(
        "ix_due_work_failed_at",
        table_name="due_work",
        schema="control",
        postgresql_where=sa.text("status = 'failed'"),
    )
    op.drop_column("due_work", "failed_at", schema="control")
    op.drop_column("due_work", "failures", schema="control")
    op.drop_column("due_work", "status", schema="control")
