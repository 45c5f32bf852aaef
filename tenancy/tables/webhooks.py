"""Outbound webhooks: every event emitted, subscriptions, one delivery per event and target, one
row per attempt."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import created_at, tenant_metadata, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)
TIMESTAMP = sa.TIMESTAMP(timezone=True)

# Every event as emitted, subscribers or not (GET /events; kept 30 days). `id` is the message id
# every delivery of it carries (`webhook-id`); `timestamp` is the body's, to the millisecond.
# `position` is the event's place in the tenant's event stream: emit stamps `position` and
# `timestamp` under a lock it holds until commit (api/events.py), so both grow in commit order.
events = sa.Table(
    "events",
    tenant_metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("timestamp", TIMESTAMP, nullable=False),
    sa.Column("data", pg.JSONB, nullable=False),
    sa.Column("position", sa.BigInteger, sa.Identity(), nullable=False),
    sa.Index("ix_events_timestamp", sa.text("timestamp DESC"), sa.text("id DESC")),
    sa.Index("ix_events_position", "position", unique=True),
    sa.Index("ix_events_type_position", "type", sa.text("position DESC")),
)

webhook_subscriptions = sa.Table(
    "webhook_subscriptions",
    tenant_metadata,
    uuid_pk(),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("events", pg.ARRAY(sa.Text), nullable=False),
    sa.Column("secret", sa.Text, nullable=False),
    # False once the receiver answered 410 Gone, or the subscription was deleted.
    sa.Column("is_active", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("disabled_at", TIMESTAMP),
    sa.Column("disabled_reason", sa.Text),
    # Deleted subscriptions are kept (soft delete) so their delivery log stays readable.
    sa.Column("deleted_at", TIMESTAMP),
    created_at(),
    updated_at(),
    sa.Index("ix_webhook_subscriptions_events", "events", postgresql_using="gin"),
)

# One message to one target: a subscription, or an explicit url + secret (the agent's
# post-call webhook). `body` is the exact JSON that is signed and sent, the same on every retry.
webhook_deliveries = sa.Table(
    "webhook_deliveries",
    tenant_metadata,
    uuid_pk(),
    sa.Column(
        "subscription_id",
        UUID,
        # Looked up (and cascaded into) through ix_webhook_deliveries_subscription_log.
        sa.ForeignKey("webhook_subscriptions.id", ondelete="CASCADE"),
    ),
    sa.Column("target_url", sa.Text),
    sa.Column("target_secret", sa.Text),
    # The agent whose post-call webhook this is (GET /agents/{id}/deliveries).
    sa.Column("agent_id", UUID, sa.ForeignKey("agents.id", ondelete="SET NULL")),
    sa.Column("event_type", sa.Text, nullable=False),
    sa.Column("message_id", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="pending"),
    sa.Column("attempt_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", TIMESTAMP, nullable=False, server_default=sa.text("now()")),
    sa.Column("last_status_code", sa.Integer),
    sa.Column("last_error", sa.Text),
    sa.Column("completed_at", TIMESTAMP),
    # A redelivery's original: the first delivery of its message to its target (a redelivery
    # of a redelivery names the same one). No foreign key: the original may go with retention
    # before its redeliveries, which still count against it (the redelivery limit).
    sa.Column("original_delivery_id", UUID),
    created_at(),
    updated_at(),
    sa.CheckConstraint("status IN ('pending', 'delivered', 'failed', 'cancelled')", name="status"),
    sa.CheckConstraint(
        "subscription_id IS NOT NULL OR (target_url IS NOT NULL AND target_secret IS NOT NULL)",
        name="target",
    ),
    sa.Index("ix_webhook_deliveries_message_id", "message_id"),
    sa.Index(
        "ix_webhook_deliveries_subscription_log",
        "subscription_id",
        sa.text("created_at DESC"),
        sa.text("id DESC"),
    ),
    sa.Index(
        "ix_webhook_deliveries_agent_log",
        "agent_id",
        sa.text("created_at DESC"),
        sa.text("id DESC"),
        postgresql_where=sa.text("agent_id IS NOT NULL"),
    ),
    # The redelivery limit counts an original's redeliveries of the last hour.
    sa.Index(
        "ix_webhook_deliveries_redeliveries",
        "original_delivery_id",
        "created_at",
        postgresql_where=sa.text("original_delivery_id IS NOT NULL"),
    ),
    # Retention: finished deliveries past 30 days go (api/event_log/tasks.py).
    sa.Index(
        "ix_webhook_deliveries_completed_at",
        "completed_at",
        postgresql_where=sa.text("completed_at IS NOT NULL"),
    ),
)

webhook_attempts = sa.Table(
    "webhook_attempts",
    tenant_metadata,
    uuid_pk(),
    sa.Column(
        "delivery_id",
        UUID,
        sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("attempt_number", sa.Integer, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("status_code", sa.Integer),
    sa.Column("error", sa.Text),
    sa.Column("duration_ms", sa.Integer, nullable=False),
    sa.Column("attempted_at", TIMESTAMP, nullable=False, server_default=sa.text("now()")),
    sa.UniqueConstraint("delivery_id", "attempt_number"),
)
