"""Idempotency keys: the first response to a POST, kept 24 hours per API key and client key."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import control_metadata, created_at

idempotency_keys = sa.Table(
    "idempotency_keys",
    control_metadata,
    sa.Column(
        "api_key_id",
        pg.UUID(as_uuid=True),
        sa.ForeignKey("api_keys.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("request_hash", sa.LargeBinary, nullable=False),
    # running until the first request answers; a crashed request's lease runs out.
    sa.Column("state", sa.Text, nullable=False, server_default="running"),
    sa.Column("locked_until", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("response_status", sa.SmallInteger),
    sa.Column("response_content_type", sa.Text),
    sa.Column("response_body", sa.LargeBinary),
    created_at(),
    sa.CheckConstraint("state IN ('running', 'done')", name="state"),
    sa.Index("ix_idempotency_keys_created_at", "created_at"),
)
