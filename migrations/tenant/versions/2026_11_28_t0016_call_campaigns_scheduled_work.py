"""call campaigns and scheduled work (CONTRACT 10): campaigns of type `call` (agent, pool,
variables, calling window, concurrency, retry policy), each recipient's calls, outcome and next
attempt; calls that wait for `start_at` (`scheduled`) or were cancelled, and the campaign that
placed them; messages that wait for `send_at` (`scheduled`) or were cancelled.

Revision ID: t0016
Revises: t0015
Create Date: 2026-11-28 00:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "t0016"
down_revision: str | None = "t0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CALL_STATUSES = "'queued', 'ringing', 'in_progress', 'completed', 'failed'"
MESSAGE_STATUSES = "'queued', 'sent', 'delivered', 'undelivered', 'failed', 'received'"


def _check(table: str, name: str, condition: str) -> None:
    op.drop_constraint(op.f(f"ck_{table}_{name}"), table, type_="check")
    op.create_check_constraint(op.f(f"ck_{table}_{name}"), table, condition)


def upgrade() -> None:
    op.add_column("campaigns", sa.Column("agent_id", pg.UUID(as_uuid=True), nullable=True))
    op.add_column("campaigns", sa.Column("pool_id", pg.UUID(as_uuid=True), nullable=True))
    op.add_column(
        "campaigns",
        sa.Column("variables", pg.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
    )
    op.add_column("campaigns", sa.Column("calling_window", pg.JSONB(), nullable=True))
    op.add_column("campaigns", sa.Column("max_concurrent_calls", sa.Integer(), nullable=True))
    op.add_column("campaigns", sa.Column("retry", pg.JSONB(), nullable=True))
    op.create_foreign_key(
        op.f("fk_campaigns_agent_id_agents"), "campaigns", "agents", ["agent_id"], ["id"]
    )
    op.create_foreign_key(
        op.f("fk_campaigns_pool_id_number_pools"),
        "campaigns",
        "number_pools",
        ["pool_id"],
        ["id"],
        ondelete="SET NULL",
    )
    _check("campaigns", "campaign_type", "campaign_type IN ('email', 'sms', 'call')")

    op.add_column(
        "campaign_recipients",
        sa.Column(
            "call_ids",
            pg.ARRAY(pg.UUID(as_uuid=True)),
            server_default=sa.text("'{}'::uuid[]"),
            nullable=False,
        ),
    )
    op.add_column("campaign_recipients", sa.Column("outcome", sa.Text(), nullable=True))
    op.add_column(
        "campaign_recipients",
        sa.Column("next_attempt_at", sa.TIMESTAMP(timezone=True), nullable=True),
    )

    op.add_column("calls", sa.Column("start_at", sa.TIMESTAMP(timezone=True), nullable=True))
    op.add_column("calls", sa.Column("campaign_id", pg.UUID(as_uuid=True), nullable=True))
    op.create_foreign_key(
        op.f("fk_calls_campaign_id_campaigns"),
        "calls",
        "campaigns",
        ["campaign_id"],
        ["id"],
        ondelete="SET NULL",
    )
    _check("calls", "status", f"status IN ({CALL_STATUSES}, 'scheduled', 'cancelled')")

    op.add_column("messages", sa.Column("send_at", sa.TIMESTAMP(timezone=True), nullable=True))
    _check("messages", "status", f"status IN ({MESSAGE_STATUSES}, 'scheduled', 'cancelled')")


def downgrade() -> None:
    op.execute("DELETE FROM messages WHERE status IN ('scheduled', 'cancelled')")
    _check("messages", "status", f"status IN ({MESSAGE_STATUSES})")
    op.drop_column("messages", "send_at")

    op.execute("UPDATE calls SET status = 'failed' WHERE status IN ('scheduled', 'cancelled')")
    _check("calls", "status", f"status IN ({CALL_STATUSES})")
    op.drop_constraint(op.f("fk_calls_campaign_id_campaigns"), "calls", type_="foreignkey")
    op.drop_column("calls", "campaign_id")
    op.drop_column("calls", "start_at")

    op.drop_column("campaign_recipients", "next_attempt_at")
    op.drop_column("campaign_recipients", "outcome")
    op.drop_column("campaign_recipients", "call_ids")

    op.execute("DELETE FROM campaigns WHERE campaign_type = 'call'")
    _check("campaigns", "campaign_type", "campaign_type IN ('email', 'sms')")
    op.drop_constraint(op.f("fk_campaigns_pool_id_number_pools"), "campaigns", type_="foreignkey")
    op.drop_constraint(op.f("fk_campaigns_agent_id_agents"), "campaigns", type_="foreignkey")
    op.drop_column("campaigns", "retry")
    op.drop_column("campaigns", "max_concurrent_calls")
    op.drop_column("campaigns", "calling_window")
    op.drop_column("campaigns", "variables")
    op.drop_column("campaigns", "pool_id")
    op.drop_column("campaigns", "agent_id")
