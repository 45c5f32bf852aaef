"""fewer relations per tenant (issue 28): three indexes that serve no query go. Each tenant
relation is a file, pg_class/pg_attribute/pg_depend rows and relcache entries in every backend
that touches the schema (bench/RESULTS.md "Scale").

- ix_webhook_deliveries_subscription_id: the left prefix of
  ix_webhook_deliveries_subscription_log (subscription_id, created_at, id), which serves every
  lookup and the ON DELETE CASCADE from webhook_subscriptions as well.
- ix_webhook_subscriptions_created_at, ix_custom_fields_created_at: the order of lists of a
  few dozen rows per sub-account (what a webhook receiver or a form needs), which a sort of the
  table's few pages serves as well.

Revision ID: t0017
Revises: t0016
Create Date: 2026-11-28 01:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "t0017"
down_revision: str | None = "t0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_webhook_deliveries_subscription_id", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_subscriptions_created_at", table_name="webhook_subscriptions")
    op.drop_index("ix_custom_fields_created_at", table_name="custom_fields")


def downgrade() -> None:
    op.create_index(
        "ix_custom_fields_created_at",
        "custom_fields",
        [sa.text("created_at DESC"), sa.text("id DESC")],
    )
    op.create_index(
        "ix_webhook_subscriptions_created_at",
        "webhook_subscriptions",
        [sa.text("created_at DESC"), sa.text("id DESC")],
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.create_index(
        "ix_webhook_deliveries_subscription_id", "webhook_deliveries", ["subscription_id"]
    )
