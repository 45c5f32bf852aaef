"""tenant_data: the tables every sub-account's rows live in, keyed by sub_account_id (issue 28,
docs/decisions.md). Each tenant schema becomes one view per table over them at tenant revision
t0018, which moves its rows here. btree_gin gives a uuid an operator class in the GIN indexes
(contact search, tags), so they lead with the sub-account like every other index.

The tables are the ones of tenancy/tables/shared.py at this revision, written out in
migrations/control/sql/c0011_tenant_data.sql.

Revision ID: c0011
Revises: c0010
Create Date: 2026-11-28 07:00:00.000000
"""

from collections.abc import Sequence
from pathlib import Path

from alembic import op
from sqlalchemy import text

revision: str = "c0011"
down_revision: str | None = "c0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = Path(__file__).resolve().parents[1] / "sql" / "c0011_tenant_data.sql"

VIEWS_IN_USE = """
SELECT count(*) FROM pg_depend AS d
JOIN pg_rewrite AS r ON r.oid = d.objid
JOIN pg_class AS t ON t.oid = d.refobjid
WHERE d.classid = 'pg_rewrite'::regclass AND t.relnamespace = 'tenant_data'::regnamespace
"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public")
    if op.get_bind().execute(text("SELECT to_regnamespace('tenant_data')")).scalar_one():
        return  # kept by a downgrade while tenant schemas used it (below)
    op.execute("CREATE SCHEMA tenant_data")
    op.execute(TABLES.read_text())


def downgrade() -> None:
    # While a tenant schema's views still read these tables (tenants at t0018 or later: their
    # rows are here), they stay, as btree_gist does (c0010); an upgrade finds them again.
    if op.get_bind().execute(text(VIEWS_IN_USE)).scalar_one():
        return
    op.execute("DROP SCHEMA tenant_data CASCADE")
