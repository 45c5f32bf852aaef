"""each view of the schema reads the shared tables as the role that queries it, not as the view's
owner (`security_invoker`), so the row-level security of control revision c0012 judges the
tenant role itself (CONTRACT 18, issue 34). The grants to that role are repeated here (c0012
gave them to the schemas that existed then), so a schema replayed from its first revision ends
the same as one provisioned at head.

Revision ID: t0020
Revises: t0019
Create Date: 2026-12-02 04:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "t0020"
down_revision: str | None = "t0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tenant"


def _each_view(before: str, after: str) -> str:
    """`before <view> after` for each view of the schema."""
    return f"""
DO $$
DECLARE v record;
BEGIN
    FOR v IN SELECT viewname FROM pg_views WHERE schemaname = current_schema()
             ORDER BY viewname LOOP
        EXECUTE $s${before} $s$ || quote_ident(v.viewname) || $s$ {after}$s$;
    END LOOP;
END $$;
"""


def upgrade() -> None:
    op.execute(_each_view("ALTER VIEW", "SET (security_invoker = true)"))
    op.execute(_each_view("GRANT SELECT, INSERT, UPDATE, DELETE ON", f"TO {ROLE}"))
    op.execute(
        f"DO $$ BEGIN EXECUTE 'GRANT USAGE ON SCHEMA ' || quote_ident(current_schema()) "
        f"|| ' TO {ROLE}'; END $$"
    )


def downgrade() -> None:
    op.execute(_each_view("ALTER VIEW", "RESET (security_invoker)"))
