"""Campaigns and their recipients, smart lists, conversations and messages."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import MONEY, created_at, tenant_metadata, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)
TIMESTAMP = sa.TIMESTAMP(timezone=True)

CAMPAIGN_STATES = ("draft", "scheduled", "sending", "completed", "paused", "cancelled", "failed")
RECIPIENT_STATES = ("pending", "sending", "sent", "failed", "skipped")
# Outbound messages move forward only: queued -> sent -> delivered | undelivered | failed;
# inbound ones are received (CONTRACT 9).
REPORTED_STATUSES = ("queued", "sent", "delivered", "undelivered", "failed", "received")
# CONTRACT 10: a message sent later waits `scheduled` (or is `cancelled` before its time).
MESSAGE_STATUSES = (*REPORTED_STATUSES, "scheduled", "cancelled")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN (" + ", ".join(f"'{value}'" for value in values) + ")"


smart_lists = sa.Table(
    "smart_lists",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    # Contacts carrying any of these tags are the list.
    sa.Column("tags", pg.ARRAY(sa.Text), nullable=False),
    created_at(),
    updated_at(),
    sa.Index("ix_smart_lists_created_at", sa.text("created_at DESC")),
)

campaigns = sa.Table(
    "campaigns",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("campaign_type", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="draft"),
    sa.Column("subject", sa.Text),
    sa.Column("message_content", sa.Text),
    sa.Column(
        "contact_ids", pg.ARRAY(UUID), nullable=False, server_default=sa.text("'{}'::uuid[]")
    ),
    sa.Column("smart_list_id", UUID, sa.ForeignKey("smart_lists.id")),
    sa.Column("start_date", TIMESTAMP),
    sa.Column("business_hours_enabled", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("business_hours_config", pg.JSONB),
    # Bumped by every schedule, resume and business-hours deferral: a send job carries the
    # version it was queued for and does nothing once the campaign has moved on.
    sa.Column("version", sa.Integer, nullable=False, server_default="0"),
    sa.Column("paused_reason", sa.Text),
    sa.Column("recipients_materialised_at", TIMESTAMP),
    sa.Column("started_at", TIMESTAMP),
    sa.Column("completed_at", TIMESTAMP),
    # Call campaigns only (CONTRACT 10): the agent that calls, the pool its caller ids come
    # from, the variables of every call, the calling window, the concurrency and the retry
    # policy ({max_attempts, delay_minutes, on}).
    sa.Column("agent_id", UUID, sa.ForeignKey("agents.id")),
    sa.Column("pool_id", UUID, sa.ForeignKey("number_pools.id", ondelete="SET NULL")),
    sa.Column("variables", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("calling_window", pg.JSONB),
    sa.Column("max_concurrent_calls", sa.Integer),
    sa.Column("retry", pg.JSONB),
    created_at(),
    updated_at(),
    sa.CheckConstraint(_one_of("status", CAMPAIGN_STATES), name="status"),
    sa.CheckConstraint("campaign_type IN ('email', 'sms', 'call')", name="campaign_type"),
    sa.Index("ix_campaigns_due", "status", "start_date"),
    sa.Index("ix_campaigns_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
)

campaign_recipients = sa.Table(
    "campaign_recipients",
    tenant_metadata,
    uuid_pk(),
    sa.Column(
        "campaign_id", UUID, sa.ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column(
        "contact_id",
        UUID,
        sa.ForeignKey("contacts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("state", sa.Text, nullable=False, server_default="pending"),
    # Set in the transaction that debits the wallet for this recipient (0 when messages are
    # free): a recipient with a charge is never charged again.
    sa.Column("charged_amount", MONEY),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("message_id", sa.Text),
    sa.Column("provider_message_id", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("claimed_at", TIMESTAMP),
    sa.Column("sent_at", TIMESTAMP),
    sa.Column("opened_at", TIMESTAMP),
    sa.Column("clicked_at", TIMESTAMP),
    sa.Column("unsubscribed_at", TIMESTAMP),
    # Call campaigns: the recipient's calls in order (one per attempt), the last call's
    # ended_reason, and when a retry may be placed.
    sa.Column("call_ids", pg.ARRAY(UUID), nullable=False, server_default=sa.text("'{}'::uuid[]")),
    sa.Column("outcome", sa.Text),
    sa.Column("next_attempt_at", TIMESTAMP),
    created_at(),
    sa.UniqueConstraint("campaign_id", "contact_id"),
    sa.CheckConstraint(_one_of("state", RECIPIENT_STATES), name="state"),
    sa.Index("ix_campaign_recipients_campaign_id_state", "campaign_id", "state"),
)

conversations = sa.Table(
    "conversations",
    tenant_metadata,
    uuid_pk(),
    # One conversation per contact; it blocks the contact's deletion (CONTRACT section 3).
    sa.Column("contact_id", UUID, sa.ForeignKey("contacts.id"), nullable=False, unique=True),
    sa.Column("last_message_at", TIMESTAMP),
    created_at(),
    updated_at(),
    sa.Index(
        "ix_conversations_last_message_at", sa.text("last_message_at DESC"), sa.text("id DESC")
    ),
)

messages = sa.Table(
    "messages",
    tenant_metadata,
    uuid_pk(),
    # Orders messages written in one transaction (they share created_at).
    sa.Column("seq", sa.BigInteger, sa.Identity(), nullable=False),
    sa.Column("conversation_id", UUID, sa.ForeignKey("conversations.id"), nullable=False),
    sa.Column("direction", sa.Text, nullable=False),
    sa.Column("sender_type", sa.Text, nullable=False),
    sa.Column("message_type", sa.Text, nullable=False),
    sa.Column("subject", sa.Text),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("campaign_id", UUID, sa.ForeignKey("campaigns.id")),
    sa.Column("provider_message_id", sa.Text),
    # SMS only: our number on the message (the sender of an outbound one, the recipient of an
    # inbound one); the conversation's next SMS goes from its last one (CONTRACT 9).
    sa.Column("phone_number", sa.Text),
    # Inbound only: when the conversation was marked read (null: unread).
    sa.Column("read_at", TIMESTAMP),
    sa.Column("error", sa.Text),
    # Outbound only: when a `scheduled` message is sent (CONTRACT 10).
    sa.Column("send_at", TIMESTAMP),
    created_at(),
    updated_at(),
    sa.CheckConstraint("direction IN ('inbound', 'outbound')", name="direction"),
    sa.CheckConstraint("message_type IN ('sms', 'email')", name="message_type"),
    sa.CheckConstraint(_one_of("status", MESSAGE_STATUSES), name="status"),
    sa.Index(
        "ix_messages_conversation_id_created_at",
        "conversation_id",
        sa.text("created_at DESC"),
        sa.text("seq DESC"),
    ),
    # A provider that retries an inbound webhook gives the same id: kept once.
    sa.Index(
        "uq_messages_inbound_provider_message_id",
        "message_type",
        "provider_message_id",
        unique=True,
        postgresql_where=sa.text("direction = 'inbound'"),
    ),
    # The carrier's status callback finds an outbound message by its id.
    sa.Index(
        "ix_messages_outbound_provider_message_id",
        "provider_message_id",
        postgresql_where=sa.text("direction = 'outbound'"),
    ),
    sa.Index(
        "ix_messages_unread_conversation_id",
        "conversation_id",
        postgresql_where=sa.text("direction = 'inbound' AND read_at IS NULL"),
    ),
)

# A carrier's status report for an outbound message whose id is not stored yet: the carrier
# can report before the send that got the id commits. The send applies it when it stores the
# id; reports for ids never stored go with the event log's retention.
message_status_reports = sa.Table(
    "message_status_reports",
    tenant_metadata,
    sa.Column("provider_message_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("received_at", TIMESTAMP, server_default=sa.text("now()"), nullable=False),
    sa.PrimaryKeyConstraint("provider_message_id", "status"),
    sa.CheckConstraint(_one_of("status", REPORTED_STATUSES), name="status"),
    sa.Index("ix_message_status_reports_received_at", "received_at"),
)
