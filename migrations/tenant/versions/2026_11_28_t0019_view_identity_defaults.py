"""each view over a shared table with an identity column takes that column's sequence as its
own default (issue 28, bench/RESULTS.md "Scale", session 16).

An INSERT through a view that leaves an identity column out gets its value from the base table's
identity, and PostgreSQL finds the identity's sequence by scanning pg_depend for every object
that depends on the column: with one view per sub-account, 10,000 entries, read each time such an
INSERT is planned again for another sub-account (every event emitted, every message stored).
That doubled PostgreSQL's CPU per request. With the sequence named as the view's default, the
INSERT reaches the table with the column filled in and nothing is scanned. The values are the
same: the identities are BY DEFAULT, and their sequences are the ones the identities use.

Revision ID: t0019
Revises: t0018
Create Date: 2026-11-28 10:30:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "t0019"
down_revision: str | None = "t0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The identity columns of the shared tables at this revision.
IDENTITIES = [("events", "position"), ("messages", "seq")]


def upgrade() -> None:
    for table, column in IDENTITIES:
        op.execute(
            f'ALTER VIEW "{table}" ALTER COLUMN "{column}" '
            f"SET DEFAULT nextval('tenant_data.{table}_{column}_seq'::regclass)"
        )


def downgrade() -> None:
    for table, column in IDENTITIES:
        op.execute(f'ALTER VIEW "{table}" ALTER COLUMN "{column}" DROP DEFAULT')
