"""voice runtime: agent prompt, first_message, transcriber, deletion; call direction, outcome,
messages and recording; speech vendor integrations

Revision ID: t0004
Revises: t0003
Create Date: 2026-11-24 10:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "t0004"
down_revision: str | None = "t0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LLM = "'openai', 'anthropic', 'google', 'deepseek', 'grok'"
SPEECH = "'deepgram', 'elevenlabs', 'cartesia'"
ENDED = (
    "'customer_hangup', 'agent_hangup', 'silence_timeout', 'max_duration', 'voicemail', "
    "'no_answer', 'busy', 'failed'"
)


def upgrade() -> None:
    op.add_column("agents", sa.Column("prompt", sa.Text(), server_default="", nullable=False))
    op.add_column("agents", sa.Column("first_message", sa.Text(), nullable=True))
    op.add_column("agents", sa.Column("transcriber", sa.Text(), nullable=True))
    op.add_column("agents", sa.Column("deleted_at", sa.TIMESTAMP(timezone=True), nullable=True))
    op.create_check_constraint(
        op.f("ck_agents_transcriber"), "agents", "transcriber IN ('openai', 'deepgram')"
    )
    op.add_column(
        "calls", sa.Column("direction", sa.Text(), server_default="outbound", nullable=False)
    )
    op.add_column("calls", sa.Column("ended_reason", sa.Text(), nullable=True))
    op.add_column("calls", sa.Column("answered_by", sa.Text(), nullable=True))
    op.add_column(
        "calls",
        sa.Column("messages", pg.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
    )
    op.add_column("calls", sa.Column("recording_key", sa.Text(), nullable=True))
    op.create_check_constraint(
        op.f("ck_calls_direction"), "calls", "direction IN ('outbound', 'inbound')"
    )
    op.create_check_constraint(op.f("ck_calls_ended_reason"), "calls", f"ended_reason IN ({ENDED})")
    op.create_check_constraint(
        op.f("ck_calls_answered_by"), "calls", "answered_by IN ('human', 'machine', 'unknown')"
    )
    op.create_index(
        "ix_calls_queued",
        "calls",
        ["created_at", "id"],
        unique=False,
        postgresql_where=sa.text("status = 'queued'"),
    )
    # Calls that ended before this revision: their outcome as CONTRACT 9 maps status to reason.
    op.execute(
        "UPDATE calls SET ended_reason = CASE status WHEN 'completed' THEN 'customer_hangup' ELSE 'failed' END "
        "WHERE status IN ('completed', 'failed')"
    )
    op.drop_constraint(op.f("ck_integrations_provider"), "integrations", type_="check")
    op.create_check_constraint(
        op.f("ck_integrations_provider"), "integrations", f"provider IN ({LLM}, {SPEECH})"
    )


def downgrade() -> None:
    op.execute(f"DELETE FROM integrations WHERE provider IN ({SPEECH})")
    op.drop_constraint(op.f("ck_integrations_provider"), "integrations", type_="check")
    op.create_check_constraint(
        op.f("ck_integrations_provider"), "integrations", f"provider IN ({LLM})"
    )
    op.drop_index(
        "ix_calls_queued", table_name="calls", postgresql_where=sa.text("status = 'queued'")
    )
    op.drop_constraint(op.f("ck_calls_answered_by"), "calls", type_="check")
    op.drop_constraint(op.f("ck_calls_ended_reason"), "calls", type_="check")
    op.drop_constraint(op.f("ck_calls_direction"), "calls", type_="check")
    op.drop_column("calls", "recording_key")
    op.drop_column("calls", "messages")
    op.drop_column("calls", "answered_by")
    op.drop_column("calls", "ended_reason")
    op.drop_column("calls", "direction")
    op.drop_constraint(op.f("ck_agents_transcriber"), "agents", type_="check")
    op.drop_column("agents", "deleted_at")
    op.drop_column("agents", "transcriber")
    op.drop_column("agents", "first_message")
    op.drop_column("agents", "prompt")
