"""a tenant schema's rows move to the shared tables of tenant_data (control revision c0011),
and each of its tables becomes a view of its own rows there (issue 28, docs/decisions.md): the
schema's relations go from about 130 to one per table, and a backend serving many sub-accounts
caches the shared tables' indexes once instead of each schema's.

Tenant SQL is unchanged: the views are automatically updatable, with a check option and the
sub-account as the default of their `sub_account_id`. The identity sequences of events.position
and messages.seq become shared ones, set past every moved row so each sub-account's positions
keep growing.

Revision ID: t0018
Revises: t0017
Create Date: 2026-11-28 07:00:00.000000
"""

from collections.abc import Sequence
from pathlib import Path

from alembic import op
from sqlalchemy import text

from tenancy.schema import sub_account_of, view_ddl

revision: str = "t0018"
down_revision: str | None = "t0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The tables at t0017 (their DDL for the downgrade: migrations/tenant/sql/t0017_tables.sql),
# parents before the tables that refer to them, with their columns.
COLUMNS: dict[str, list[str]] = {
    "agents": [
        "id", "name", "voice_id", "max_duration", "temperature", "silence_timeout",
        "voice_activity_timeout", "llm_model", "language", "background_noise", "background_type",
        "voicemail_detection", "voicemail_type", "voicemail_message", "backcchanneling",
        "is_active", "webhook", "webhook_url", "webhook_secret", "recording", "prompt",
        "first_message", "transcriber", "timezone", "tool_ids", "analysis", "deleted_at",
        "created_at", "updated_at",
    ],
    "calendars": [
        "id", "name", "timezone", "slot_minutes", "buffer_minutes", "min_notice_minutes",
        "max_days_ahead", "availability", "reminders", "created_at", "updated_at",
    ],
    "companies": ["id", "name", "created_at", "updated_at"],
    "custom_fields": [
        "id", "key", "name", "field_type", "options", "read_only", "is_active", "created_at",
        "updated_at",
    ],
    "events": ["id", "type", "timestamp", "data", "position"],
    "integrations": ["provider", "api_key", "created_at", "updated_at"],
    "invoice_counter": ["id", "last_number"],
    "message_status_reports": ["provider_message_id", "status", "error", "received_at"],
    "number_pools": ["id", "name", "cursor", "created_at", "updated_at"],
    "smart_lists": ["id", "name", "tags", "created_at", "updated_at"],
    "tools": [
        "id", "name", "type", "description", "parameters", "config", "header_values", "secret",
        "created_at", "updated_at",
    ],
    "wallet": ["id", "balance", "currency", "created_at", "updated_at"],
    "wallet_transactions": [
        "id", "amount", "balance_after", "kind", "description", "reference_type", "reference_id",
        "status", "created_at",
    ],
    "webhook_subscriptions": [
        "id", "url", "events", "secret", "is_active", "disabled_at", "disabled_reason",
        "deleted_at", "created_at", "updated_at",
    ],
    "campaigns": [
        "id", "name", "campaign_type", "status", "subject", "message_content", "contact_ids",
        "smart_list_id", "start_date", "business_hours_enabled", "business_hours_config",
        "version", "paused_reason", "recipients_materialised_at", "started_at", "completed_at",
        "agent_id", "pool_id", "variables", "calling_window", "max_concurrent_calls", "retry",
        "created_at", "updated_at",
    ],
    "contacts": [
        "id", "name", "first_name", "last_name", "email", "phone", "address", "tags",
        "lead_source", "custom_field_values", "company_id", "assigned_user_id", "status",
        "created_at", "updated_at",
    ],
    "phone_numbers": [
        "id", "phone_number", "purchased", "agent_id", "is_active", "purchased_at",
        "next_billing_date", "provider", "provider_ref", "dispatch_rule_id", "assigned_at",
        "released_at", "created_at", "updated_at",
    ],
    "webhook_deliveries": [
        "id", "subscription_id", "target_url", "target_secret", "agent_id", "event_type",
        "message_id", "body", "status", "attempt_count", "next_attempt_at", "last_status_code",
        "last_error", "completed_at", "original_delivery_id", "created_at", "updated_at",
    ],
    "calls": [
        "id", "contact_id", "agent_id", "phone_number_id", "pool_id", "from_number", "to_number",
        "status", "provider", "provider_call_id", "started_at", "ended_at", "duration_seconds",
        "transcript", "recording_url", "billed_minutes", "cost", "error", "direction",
        "ended_reason", "answered_by", "messages", "recording_key", "variables", "tool_calls",
        "transferred_to", "analysis", "start_at", "campaign_id", "created_at", "updated_at",
    ],
    "campaign_recipients": [
        "id", "campaign_id", "contact_id", "state", "charged_amount", "attempts", "message_id",
        "provider_message_id", "error", "claimed_at", "sent_at", "opened_at", "clicked_at",
        "unsubscribed_at", "call_ids", "outcome", "next_attempt_at", "created_at",
    ],
    "contact_consents": ["contact_id", "channel", "status", "source", "updated_at"],
    "conversations": ["id", "contact_id", "last_message_at", "created_at", "updated_at"],
    "invoices": [
        "id", "invoice_number", "contact_id", "quote_id", "amount", "status", "issued_at",
        "due_date", "paid_at", "payment_method", "notes", "items", "payment_url",
        "payment_link_expires_at", "created_at", "updated_at",
    ],
    "notes": [
        "id", "contact_id", "content", "agent_id", "deleted_at", "created_at", "updated_at",
    ],
    "number_pool_members": ["pool_id", "phone_number_id", "position"],
    "webhook_attempts": [
        "id", "delivery_id", "attempt_number", "url", "status_code", "error", "duration_ms",
        "attempted_at",
    ],
    "appointments": [
        "id", "calendar_id", "contact_id", "start", "end", "status", "title", "notes", "source",
        "call_id", "reminders", "created_at", "updated_at",
    ],
    "messages": [
        "id", "seq", "conversation_id", "direction", "sender_type", "message_type", "subject",
        "content", "status", "campaign_id", "provider_message_id", "phone_number", "read_at",
        "error", "send_at", "created_at", "updated_at",
    ],
}  # fmt: skip

IDENTITIES = (("events", "position"), ("messages", "seq"))
TABLES_AT_T0017 = Path(__file__).resolve().parents[1] / "sql" / "t0017_tables.sql"
# Tenants migrate side by side: one at a time moves a shared sequence.
LOCK_SEQUENCES = "SELECT pg_advisory_xact_lock(hashtext('tenant_data identity sequences'))"


def _listed(table: str) -> str:
    return ", ".join(f'"{name}"' for name in COLUMNS[table])


def _tables() -> str:
    return ", ".join(f'"{table}"' for table in COLUMNS)


def upgrade() -> None:
    bind = op.get_bind()
    sub_account_id = sub_account_of(bind.execute(text("SELECT current_schema()")).scalar_one())
    # Every table at once, before a row is read: a write committed after the copy below would
    # be lost with the dropped table.
    op.execute(f"LOCK TABLE {_tables()} IN ACCESS EXCLUSIVE MODE")
    for table in COLUMNS:
        bind.execute(
            text(
                f'INSERT INTO tenant_data."{table}" (sub_account_id, {_listed(table)}) '
                f'SELECT :id, {_listed(table)} FROM "{table}"'
            ),
            {"id": sub_account_id},
        )
    op.execute(f"DROP TABLE {_tables()}")
    # t0019 adds the identity defaults, t0020 the row security
    op.execute(view_ddl(sub_account_id, COLUMNS, with_identities=False, row_security=False))
    op.execute(LOCK_SEQUENCES)
    for table, column in IDENTITIES:
        op.execute(
            f"SELECT setval(pg_get_serial_sequence('tenant_data.{table}', '{column}'), "
            f"greatest(max({column}), (SELECT last_value FROM tenant_data.{table}_{column}_seq))) "
            f"FROM tenant_data.{table}"
        )


def downgrade() -> None:
    bind = op.get_bind()
    sub_account_id = sub_account_of(bind.execute(text("SELECT current_schema()")).scalar_one())
    op.execute(f"LOCK TABLE {_tables()} IN ACCESS EXCLUSIVE MODE")  # the views, as above
    op.execute(f"DROP VIEW {_tables()}")
    op.execute(TABLES_AT_T0017.read_text())
    for table in COLUMNS:
        bind.execute(
            text(
                f'INSERT INTO "{table}" ({_listed(table)}) SELECT {_listed(table)} '
                f'FROM tenant_data."{table}" WHERE sub_account_id = :id'
            ),
            {"id": sub_account_id},
        )
    for table in reversed(COLUMNS):
        bind.execute(
            text(f'DELETE FROM tenant_data."{table}" WHERE sub_account_id = :id'),
            {"id": sub_account_id},
        )
    for table, column in IDENTITIES:
        op.execute(
            f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), max({column})) "
            f'FROM "{table}" HAVING max({column}) IS NOT NULL'
        )
