"""two-way sms: delivery statuses, our number and read time on messages; conversation order

Revision ID: t0007
Revises: t0004
Create Date: 2026-11-24 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "t0007"
down_revision: str | None = "t0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = "'queued', 'sent', 'delivered', 'undelivered', 'failed', 'received'"
OLD_STATUSES = "'queued', 'sent', 'failed', 'received'"


def upgrade() -> None:
    op.add_column("messages", sa.Column("phone_number", sa.Text(), nullable=True))
    op.add_column("messages", sa.Column("read_at", sa.TIMESTAMP(timezone=True), nullable=True))
    op.drop_constraint(op.f("ck_messages_status"), "messages", type_="check")
    op.create_check_constraint(op.f("ck_messages_status"), "messages", f"status IN ({STATUSES})")
    op.create_index(
        "ix_messages_outbound_provider_message_id",
        "messages",
        ["provider_message_id"],
        unique=False,
        postgresql_where=sa.text("direction = 'outbound'"),
    )
    op.create_index(
        "ix_messages_unread_conversation_id",
        "messages",
        ["conversation_id"],
        unique=False,
        postgresql_where=sa.text("direction = 'inbound' AND read_at IS NULL"),
    )
    op.create_index(
        "ix_conversations_last_message_at",
        "conversations",
        [sa.text("last_message_at DESC"), sa.text("id DESC")],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_conversations_last_message_at", table_name="conversations")
    op.drop_index(
        "ix_messages_unread_conversation_id",
        table_name="messages",
        postgresql_where=sa.text("direction = 'inbound' AND read_at IS NULL"),
    )
    op.drop_index(
        "ix_messages_outbound_provider_message_id",
        table_name="messages",
        postgresql_where=sa.text("direction = 'outbound'"),
    )
    op.execute("UPDATE messages SET status = 'sent' WHERE status IN ('delivered', 'undelivered')")
    op.drop_constraint(op.f("ck_messages_status"), "messages", type_="check")
    op.create_check_constraint(
        op.f("ck_messages_status"), "messages", f"status IN ({OLD_STATUSES})"
    )
    op.drop_column("messages", "read_at")
    op.drop_column("messages", "phone_number")
