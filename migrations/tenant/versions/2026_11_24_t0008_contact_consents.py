"""contact consent per channel (sms, email, call); the unsubscribes table becomes consent rows

Revision ID: t0008
Revises: t0007
Create Date: 2026-11-24 17:05:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "t0008"
down_revision: str | None = "t0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCES = "'api', 'inbound_keyword', 'unsubscribe_link', 'campaign_unsubscribe_header'"


def upgrade() -> None:
    op.create_table(
        "contact_consents",
        sa.Column("contact_id", sa.UUID(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "channel IN ('sms', 'email', 'call')", name=op.f("ck_contact_consents_channel")
        ),
        sa.CheckConstraint(
            "status IN ('granted', 'revoked')", name=op.f("ck_contact_consents_status")
        ),
        sa.CheckConstraint(f"source IN ({SOURCES})", name=op.f("ck_contact_consents_source")),
        sa.ForeignKeyConstraint(
            ["contact_id"],
            ["contacts.id"],
            name=op.f("fk_contact_consents_contact_id_contacts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("contact_id", "channel", name=op.f("pk_contact_consents")),
    )
    # Email rows came from the campaign unsubscribe link, sms rows from an inbound STOP.
    op.execute(
        "INSERT INTO contact_consents (contact_id, channel, status, source, updated_at) "
        "SELECT contact_id, channel, 'revoked', CASE channel WHEN 'email' THEN 'unsubscribe_link' "
        "ELSE 'inbound_keyword' END, created_at FROM unsubscribes"
    )
    op.drop_table("unsubscribes")


def downgrade() -> None:
    op.create_table(
        "unsubscribes",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("contact_id", sa.UUID(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("campaign_id", sa.UUID(), nullable=True),
        sa.Column(
            "created_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("channel IN ('sms', 'email')", name=op.f("ck_unsubscribes_channel")),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_unsubscribes_campaign_id_campaigns"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["contact_id"],
            ["contacts.id"],
            name=op.f("fk_unsubscribes_contact_id_contacts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_unsubscribes")),
        sa.UniqueConstraint(
            "contact_id", "channel", name=op.f("uq_unsubscribes_contact_id_channel")
        ),
    )
    op.execute(
        "INSERT INTO unsubscribes (contact_id, channel, created_at) "
        "SELECT contact_id, channel, updated_at FROM contact_consents "
        "WHERE status = 'revoked' AND channel IN ('sms', 'email')"
    )
    op.drop_table("contact_consents")
