"""agents that act (CONTRACT 10): tools (the signing secret and an http tool's header values
kept as Fernet tokens); agents gain timezone, tool_ids and analysis; calls gain variables,
tool_calls, transferred_to and analysis, and may end `transferred`. Existing agents are UTC
with no tools and no analysis; existing calls had no variables and called no tools.

Revision ID: t0013
Revises: t0012
Create Date: 2026-11-27 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "t0013"
down_revision: str | None = "t0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ENDED = (
    "'customer_hangup', 'agent_hangup', 'silence_timeout', 'max_duration', 'voicemail', "
    "'no_answer', 'busy', 'failed'"
)
TOOL_TYPES = "'http', 'transfer_call', 'send_sms', 'check_availability', 'book_appointment'"


def upgrade() -> None:
    op.create_table(
        "tools",
        sa.Column(
            "id", pg.UUID(as_uuid=True), server_default=sa.text("gen_random_uuid()"), nullable=False
        ),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("parameters", pg.JSONB(), nullable=False),
        sa.Column("config", pg.JSONB(), nullable=False),
        sa.Column("header_values", sa.Text(), nullable=True),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(f"type IN ({TOOL_TYPES})", name=op.f("ck_tools_type")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tools")),
    )
    op.create_index("uq_tools_name", "tools", ["name"], unique=True)
    op.create_index(
        "ix_tools_created_at",
        "tools",
        [sa.text("created_at DESC"), sa.text("id DESC")],
        unique=False,
    )

    op.add_column("agents", sa.Column("timezone", sa.Text(), server_default="UTC", nullable=False))
    op.add_column(
        "agents",
        sa.Column(
            "tool_ids",
            pg.ARRAY(pg.UUID(as_uuid=True)),
            server_default=sa.text("'{}'::uuid[]"),
            nullable=False,
        ),
    )
    op.add_column("agents", sa.Column("analysis", pg.JSONB(), nullable=True))

    op.add_column(
        "calls",
        sa.Column("variables", pg.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
    )
    op.add_column(
        "calls",
        sa.Column("tool_calls", pg.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
    )
    op.add_column("calls", sa.Column("transferred_to", sa.Text(), nullable=True))
    op.add_column("calls", sa.Column("analysis", pg.JSONB(), nullable=True))
    op.drop_constraint(op.f("ck_calls_ended_reason"), "calls", type_="check")
    op.create_check_constraint(
        op.f("ck_calls_ended_reason"), "calls", f"ended_reason IN ({ENDED}, 'transferred')"
    )


def downgrade() -> None:
    op.execute("UPDATE calls SET ended_reason = 'agent_hangup' WHERE ended_reason = 'transferred'")
    op.drop_constraint(op.f("ck_calls_ended_reason"), "calls", type_="check")
    op.create_check_constraint(op.f("ck_calls_ended_reason"), "calls", f"ended_reason IN ({ENDED})")
    op.drop_column("calls", "analysis")
    op.drop_column("calls", "transferred_to")
    op.drop_column("calls", "tool_calls")
    op.drop_column("calls", "variables")
    op.drop_column("agents", "analysis")
    op.drop_column("agents", "tool_ids")
    op.drop_column("agents", "timezone")
    op.drop_index("ix_tools_created_at", table_name="tools")
    op.drop_index("uq_tools_name", table_name="tools")
    op.drop_table("tools")
