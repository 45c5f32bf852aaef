"""event log: every emitted event kept (events), agent post-call deliveries tied to their agent,
delivery log and retention indexes

Revision ID: t0006
Revises: t0004
Create Date: 2026-11-24 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "t0006"
down_revision: str | None = "t0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("data", pg.JSONB(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index(
        "ix_events_timestamp",
        "events",
        [sa.text("timestamp DESC"), sa.text("id DESC")],
        unique=False,
    )
    op.create_index(
        "ix_events_type_timestamp",
        "events",
        ["type", sa.text("timestamp DESC"), sa.text("id DESC")],
        unique=False,
    )
    op.add_column("webhook_deliveries", sa.Column("agent_id", pg.UUID(as_uuid=True), nullable=True))
    op.create_foreign_key(
        op.f("fk_webhook_deliveries_agent_id_agents"),
        "webhook_deliveries",
        "agents",
        ["agent_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index(
        "ix_webhook_deliveries_subscription_log",
        "webhook_deliveries",
        ["subscription_id", sa.text("created_at DESC"), sa.text("id DESC")],
        unique=False,
    )
    op.create_index(
        "ix_webhook_deliveries_agent_log",
        "webhook_deliveries",
        ["agent_id", sa.text("created_at DESC"), sa.text("id DESC")],
        unique=False,
        postgresql_where=sa.text("agent_id IS NOT NULL"),
    )
    op.create_index(
        "ix_webhook_deliveries_completed_at",
        "webhook_deliveries",
        ["completed_at"],
        unique=False,
        postgresql_where=sa.text("completed_at IS NOT NULL"),
    )
    # What was sent before this revision: its events into the log, post-call deliveries to their agent.
    op.execute("""
        INSERT INTO events (id, type, timestamp, data)
        SELECT DISTINCT ON (message_id) message_id, event_type, (body::jsonb ->> 'timestamp')::timestamptz,
               body::jsonb -> 'data'
        FROM webhook_deliveries ORDER BY message_id, created_at
        ON CONFLICT (id) DO NOTHING
    """)
    op.execute("""
        UPDATE webhook_deliveries AS d SET agent_id = a.id
        FROM agents AS a
        WHERE d.subscription_id IS NULL AND d.event_type LIKE 'call.%'
          AND a.id::text = d.body::jsonb #>> '{data,call,agent_id}'
    """)


def downgrade() -> None:
    op.drop_index(
        "ix_webhook_deliveries_completed_at",
        table_name="webhook_deliveries",
        postgresql_where=sa.text("completed_at IS NOT NULL"),
    )
    op.drop_index(
        "ix_webhook_deliveries_agent_log",
        table_name="webhook_deliveries",
        postgresql_where=sa.text("agent_id IS NOT NULL"),
    )
    op.drop_index("ix_webhook_deliveries_subscription_log", table_name="webhook_deliveries")
    op.drop_constraint(
        op.f("fk_webhook_deliveries_agent_id_agents"), "webhook_deliveries", type_="foreignkey"
    )
    op.drop_column("webhook_deliveries", "agent_id")
    op.drop_index("ix_events_type_timestamp", table_name="events")
    op.drop_index("ix_events_timestamp", table_name="events")
    op.drop_table("events")
