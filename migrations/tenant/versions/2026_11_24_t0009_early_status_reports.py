"""message status reports that arrive before the send stored the carrier's message id

Revision ID: t0009
Revises: t0005
Create Date: 2026-11-24 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "t0009"
down_revision: str | None = "t0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = "'queued', 'sent', 'delivered', 'undelivered', 'failed', 'received'"


def upgrade() -> None:
    op.create_table(
        "message_status_reports",
        sa.Column("provider_message_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "received_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            f"status IN ({STATUSES})", name=op.f("ck_message_status_reports_status")
        ),
        sa.PrimaryKeyConstraint(
            "provider_message_id", "status", name=op.f("pk_message_status_reports")
        ),
    )
    op.create_index(
        "ix_message_status_reports_received_at",
        "message_status_reports",
        ["received_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_message_status_reports_received_at", table_name="message_status_reports")
    op.drop_table("message_status_reports")
