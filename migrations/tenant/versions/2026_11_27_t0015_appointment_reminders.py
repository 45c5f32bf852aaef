"""appointment reminders (CONTRACT 10): each appointment keeps the reminders planned for its
current start (`reminders`, jsonb array): their times, texts, message ids and outcomes.

Revision ID: t0015
Revises: t0014
Create Date: 2026-11-27 22:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "t0015"
down_revision: str | None = "t0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "appointments",
        sa.Column("reminders", pg.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("appointments", "reminders")
