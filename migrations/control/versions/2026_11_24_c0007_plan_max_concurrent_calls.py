"""control.plans.max_concurrent_calls (default 10, 1..1000)

Revision ID: c0007
Revises: c0006
Create Date: 2026-11-24 10:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c0007"
down_revision: str | None = "c0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "plans",
        sa.Column("max_concurrent_calls", sa.Integer(), server_default="10", nullable=False),
        schema="control",
    )
    op.create_check_constraint(
        op.f("ck_plans_max_concurrent_calls"),
        "plans",
        "max_concurrent_calls BETWEEN 1 AND 1000",
        schema="control",
    )


def downgrade() -> None:
    op.drop_constraint(
        op.f("ck_plans_max_concurrent_calls"), "plans", schema="control", type_="check"
    )
    op.drop_column("plans", "max_concurrent_calls", schema="control")
