"""btree_gist in schema public: tenant appointments keep one calendar's booked appointments from
overlapping with an exclusion constraint on (calendar_id WITH =, tstzrange(start, end) WITH &&),
and a uuid needs btree_gist's operator class in a gist index (tenant revision t0014). Set up
once for the database, before any tenant schema uses it, like pg_trgm (migrations/control/env.py).

Revision ID: c0010
Revises: c0008
Create Date: 2026-11-27 15:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "c0010"
down_revision: str | None = "c0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist SCHEMA public")


def downgrade() -> None:
    # The extension stays, as pg_trgm does: tenant schemas (their appointments' exclusion
    # constraint) use it whatever revision the control schema is at, and dropping it would be
    # refused while any does.
    pass
