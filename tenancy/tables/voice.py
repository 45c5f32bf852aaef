"""Voice: LLM provider integrations, AI agents, phone numbers, number pools and calls."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import MONEY, created_at, tenant_metadata, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)
JSONB = pg.JSONB
TIMESTAMP = sa.TIMESTAMP(timezone=True)

LLM_PROVIDERS = ("openai", "anthropic", "google", "deepseek", "grok")
SPEECH_PROVIDERS = ("deepgram", "elevenlabs", "cartesia")
PROVIDERS = LLM_PROVIDERS + SPEECH_PROVIDERS
# CONTRACT 10: a call placed later waits `scheduled` (or is `cancelled` before it starts).
CALL_STATUSES = (
    "queued",
    "ringing",
    "in_progress",
    "completed",
    "failed",
    "scheduled",
    "cancelled",
)
ENDED_REASONS = (
    "customer_hangup",
    "agent_hangup",
    "silence_timeout",
    "max_duration",
    "voicemail",
    "no_answer",
    "busy",
    "failed",
    "transferred",
)
# CONTRACT 10: what an agent's tool does when the model calls it. The calendar types are
# accepted by the table already; the API refuses them until the calendars feature exists.
TOOL_TYPES = ("http", "transfer_call", "send_sms", "check_availability", "book_appointment")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


integrations = sa.Table(
    "integrations",
    tenant_metadata,
    sa.Column("provider", sa.Text, primary_key=True),
    # Never returned by any operation.
    sa.Column("api_key", sa.Text, nullable=False),
    created_at(),
    updated_at(),
    sa.CheckConstraint(_one_of("provider", PROVIDERS), name="provider"),
)

agents = sa.Table(
    "agents",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("voice_id", sa.Text, nullable=False),
    sa.Column("max_duration", sa.Float, nullable=False),
    sa.Column("temperature", sa.Float, nullable=False),
    sa.Column("silence_timeout", sa.Float, nullable=False),
    sa.Column("voice_activity_timeout", sa.Float, nullable=False),
    sa.Column("llm_model", sa.Text, nullable=False),
    sa.Column("language", sa.Text, nullable=False),
    sa.Column("background_noise", sa.Boolean, nullable=False),
    sa.Column("background_type", sa.Text),
    sa.Column("voicemail_detection", sa.Boolean, nullable=False),
    sa.Column("voicemail_type", sa.Text),
    sa.Column("voicemail_message", sa.Text),
    sa.Column("backcchanneling", sa.Boolean, nullable=False),
    sa.Column("is_active", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("webhook", sa.Boolean, nullable=False),
    sa.Column("webhook_url", sa.Text),
    # Standard Webhooks signing secret (whsec_...) of the post-call webhook.
    sa.Column("webhook_secret", sa.Text, nullable=False),
    sa.Column("recording", sa.Boolean, nullable=False),
    # CONTRACT 6: the system instructions, the line spoken on answer (null: the contact speaks
    # first) and the transcription vendor (null: the first of openai, deepgram connected).
    sa.Column("prompt", sa.Text, nullable=False, server_default=""),
    sa.Column("first_message", sa.Text),
    sa.Column("transcriber", sa.Text),
    # CONTRACT 10: the IANA zone of `now` and `today` in the prompt, the tools offered to the
    # model (ids of `tools`, in order; DELETE of a tool checks them under a lock, as there is
    # no foreign key on an array) and the post-call analysis settings (null: none).
    sa.Column("timezone", sa.Text, nullable=False, server_default="UTC"),
    sa.Column("tool_ids", pg.ARRAY(UUID), nullable=False, server_default=sa.text("'{}'::uuid[]")),
    sa.Column("analysis", JSONB),
    # A deleted agent is 404 everywhere; its calls keep their agent_id.
    sa.Column("deleted_at", TIMESTAMP),
    created_at(),
    updated_at(),
    sa.CheckConstraint("transcriber IN ('openai', 'deepgram')", name="transcriber"),
    sa.CheckConstraint("temperature >= 0 AND temperature <= 1", name="temperature"),
    sa.CheckConstraint(
        "max_duration > 0 AND silence_timeout > 0 AND voice_activity_timeout > 0",
        name="positive_durations",
    ),
    sa.CheckConstraint(
        "NOT background_noise OR background_type IS NOT NULL", name="background_type"
    ),
    sa.CheckConstraint(
        "NOT voicemail_detection OR voicemail_type IN ('leave_message', 'hangup')",
        name="voicemail_type",
    ),
    sa.CheckConstraint("NOT webhook OR webhook_url IS NOT NULL", name="webhook_url"),
    sa.Index("ix_agents_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
)

phone_numbers = sa.Table(
    "phone_numbers",
    tenant_metadata,
    uuid_pk(),
    sa.Column("phone_number", sa.Text, nullable=False),
    sa.Column("purchased", sa.Boolean, nullable=False),
    sa.Column("agent_id", UUID, sa.ForeignKey("agents.id", ondelete="SET NULL")),
    sa.Column("is_active", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("purchased_at", TIMESTAMP),
    sa.Column("next_billing_date", TIMESTAMP),
    # The telephony provider that holds the number and its reference there (e.g. a Twilio PN sid).
    sa.Column("provider", sa.Text, nullable=False),
    sa.Column("provider_ref", sa.Text),
    # The inbound routing to the agent (a SIP dispatch rule); null when unassigned.
    sa.Column("dispatch_rule_id", sa.Text),
    sa.Column("assigned_at", TIMESTAMP),
    sa.Column("released_at", TIMESTAMP),
    created_at(),
    updated_at(),
    sa.CheckConstraint(
        "purchased OR (purchased_at IS NULL AND next_billing_date IS NULL)",
        name="imported_not_billed",
    ),
    sa.CheckConstraint("is_active OR agent_id IS NULL", name="released_unassigned"),
    # A number is held once; a released one may be bought or imported again.
    sa.Index(
        "uq_phone_numbers_phone_number",
        "phone_number",
        unique=True,
        postgresql_where=sa.text("is_active"),
    ),
    sa.Index("ix_phone_numbers_agent_id", "agent_id"),
)

number_pools = sa.Table(
    "number_pools",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    # Round-robin position: each call takes the next value with one UPDATE ... RETURNING.
    sa.Column("cursor", sa.BigInteger, nullable=False, server_default="0"),
    created_at(),
    updated_at(),
    sa.Index("ix_number_pools_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
)

number_pool_members = sa.Table(
    "number_pool_members",
    tenant_metadata,
    sa.Column(
        "pool_id", UUID, sa.ForeignKey("number_pools.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column(
        "phone_number_id",
        UUID,
        sa.ForeignKey("phone_numbers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("position", sa.Integer, nullable=False),
    sa.UniqueConstraint("pool_id", "position"),
    sa.Index("ix_number_pool_members_phone_number_id", "phone_number_id"),
)

calls = sa.Table(
    "calls",
    tenant_metadata,
    uuid_pk(),
    # NO ACTION: a contact with calls cannot be deleted (409 contact_referenced).
    sa.Column("contact_id", UUID, sa.ForeignKey("contacts.id"), nullable=False),
    sa.Column("agent_id", UUID, sa.ForeignKey("agents.id"), nullable=False),
    sa.Column("phone_number_id", UUID, sa.ForeignKey("phone_numbers.id")),
    sa.Column("pool_id", UUID, sa.ForeignKey("number_pools.id", ondelete="SET NULL")),
    sa.Column("from_number", sa.Text, nullable=False),
    sa.Column("to_number", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="queued"),
    sa.Column("provider", sa.Text, nullable=False),
    sa.Column("provider_call_id", sa.Text),
    sa.Column("started_at", TIMESTAMP),
    sa.Column("ended_at", TIMESTAMP),
    sa.Column("duration_seconds", sa.Integer),
    sa.Column("transcript", sa.Text),
    sa.Column("recording_url", sa.Text),
    sa.Column("billed_minutes", sa.Integer),
    sa.Column("cost", MONEY),
    sa.Column("error", sa.Text),
    sa.Column("direction", sa.Text, nullable=False, server_default="outbound"),
    sa.Column("ended_reason", sa.Text),
    sa.Column("answered_by", sa.Text),
    # [{role: agent|contact, text, start_seconds}] in order.
    sa.Column("messages", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    # Where the recording is kept (SWITCHBOARD_RECORDINGS); recording_url is derived from it.
    sa.Column("recording_key", sa.Text),
    # CONTRACT 10: the variables the call was placed with ({name: text}), the tools the model
    # called in order, the number a transfer connected the contact to, the post-call analysis.
    sa.Column("variables", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("tool_calls", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    sa.Column("transferred_to", sa.Text),
    sa.Column("analysis", JSONB),
    # CONTRACT 10: when a scheduled call is placed, and the call campaign that placed it.
    sa.Column("start_at", TIMESTAMP),
    sa.Column("campaign_id", UUID, sa.ForeignKey("campaigns.id", ondelete="SET NULL")),
    created_at(),
    updated_at(),
    sa.CheckConstraint(_one_of("status", CALL_STATUSES), name="status"),
    sa.CheckConstraint("direction IN ('outbound', 'inbound')", name="direction"),
    sa.CheckConstraint(_one_of("ended_reason", ENDED_REASONS), name="ended_reason"),
    sa.CheckConstraint("answered_by IN ('human', 'machine', 'unknown')", name="answered_by"),
    sa.Index("ix_calls_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
    sa.Index("ix_calls_contact_id", "contact_id"),
    sa.Index("ix_calls_agent_id", "agent_id"),
    sa.Index(
        "ix_calls_open",
        "status",
        postgresql_where=sa.text("status IN ('queued', 'ringing', 'in_progress')"),
    ),
    # The sub-account's queue of calls waiting for a free place (max_concurrent_calls).
    sa.Index("ix_calls_queued", "created_at", "id", postgresql_where=sa.text("status = 'queued'")),
)

# CONTRACT 10: a tool an agent offers its model. `config` is what the API shows (an http tool's
# header values as "***"); the header values themselves are `header_values`, a Fernet token of
# their JSON object (null without headers), and `secret` the Standard Webhooks signing secret,
# also a Fernet token (tenancy/secrets.py lists both).
tools = sa.Table(
    "tools",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("parameters", JSONB, nullable=False),
    sa.Column("config", JSONB, nullable=False),
    sa.Column("header_values", sa.Text),
    sa.Column("secret", sa.Text, nullable=False),
    created_at(),
    updated_at(),
    sa.CheckConstraint(_one_of("type", TOOL_TYPES), name="type"),
    # Concurrent creates of one name: the index lets exactly one in (409 tool_name_taken).
    sa.Index("uq_tools_name", "name", unique=True),
    sa.Index("ix_tools_created_at", sa.text("created_at DESC"), sa.text("id DESC")),
)
