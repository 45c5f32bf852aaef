"""calendars and appointments (CONTRACT 10): calendars with their availability windows and
reminders; appointments of a calendar and a contact, whose booked ones never overlap (an
exclusion constraint with btree_gist, set up in public by control revision c0010). The
appointments table t0002 created as a placeholder (no operation ever wrote it) is replaced; a
tenant whose placeholder holds rows someone wrote by hand fails this revision and keeps them.

Revision ID: t0014
Revises: t0013
Create Date: 2026-11-27 15:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "t0014"
down_revision: str | None = "t0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    held = op.get_bind().execute(sa.text("SELECT count(*) FROM appointments")).scalar_one()
    if held:
        raise RuntimeError(
            f"the placeholder appointments table holds {held} row(s) written "
            "outside the API; move them away, then migrate again"
        )
    op.drop_index(op.f("ix_appointments_contact_id"), table_name="appointments")
    op.drop_table("appointments")
    op.create_table(
        "calendars",
        sa.Column(
            "id", pg.UUID(as_uuid=True), server_default=sa.text("gen_random_uuid()"), nullable=False
        ),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("timezone", sa.Text(), nullable=False),
        sa.Column("slot_minutes", sa.Integer(), server_default="30", nullable=False),
        sa.Column("buffer_minutes", sa.Integer(), server_default="0", nullable=False),
        sa.Column("min_notice_minutes", sa.Integer(), server_default="60", nullable=False),
        sa.Column("max_days_ahead", sa.Integer(), server_default="60", nullable=False),
        sa.Column("availability", pg.JSONB(), nullable=False),
        sa.Column("reminders", pg.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column(
            "created_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "slot_minutes BETWEEN 5 AND 480", name=op.f("ck_calendars_slot_minutes")
        ),
        sa.CheckConstraint(
            "buffer_minutes BETWEEN 0 AND 240", name=op.f("ck_calendars_buffer_minutes")
        ),
        sa.CheckConstraint(
            "min_notice_minutes BETWEEN 0 AND 43200", name=op.f("ck_calendars_min_notice_minutes")
        ),
        sa.CheckConstraint(
            "max_days_ahead BETWEEN 1 AND 365", name=op.f("ck_calendars_max_days_ahead")
        ),
        sa.CheckConstraint(
            "jsonb_typeof(availability) = 'array'", name=op.f("ck_calendars_availability_array")
        ),
        sa.CheckConstraint(
            "jsonb_typeof(reminders) = 'array'", name=op.f("ck_calendars_reminders_array")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calendars")),
    )
    op.create_table(
        "appointments",
        sa.Column(
            "id", pg.UUID(as_uuid=True), server_default=sa.text("gen_random_uuid()"), nullable=False
        ),
        sa.Column("calendar_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("contact_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("start", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("end", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("status", sa.Text(), server_default="booked", nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("source", sa.Text(), server_default="api", nullable=False),
        sa.Column("call_id", pg.UUID(as_uuid=True), nullable=True),
        sa.Column(
            "created_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "status IN ('booked', 'cancelled')", name=op.f("ck_appointments_status")
        ),
        sa.CheckConstraint("source IN ('api', 'agent')", name=op.f("ck_appointments_source")),
        sa.CheckConstraint('"end" > start', name=op.f("ck_appointments_end_after_start")),
        pg.ExcludeConstraint(
            (sa.column("calendar_id"), "="),
            (sa.func.tstzrange(sa.column("start"), sa.column("end")), "&&"),
            name="ex_appointments_booked_overlap",
            using="gist",
            where=sa.text("status = 'booked'"),
        ),
        sa.ForeignKeyConstraint(
            ["calendar_id"],
            ["calendars.id"],
            name=op.f("fk_appointments_calendar_id_calendars"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["contact_id"],
            ["contacts.id"],
            name=op.f("fk_appointments_contact_id_contacts"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["call_id"], ["calls.id"], name=op.f("fk_appointments_call_id_calls")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_appointments")),
    )
    op.create_index(
        "ix_appointments_calendar_id_start", "appointments", ["calendar_id", "start"], unique=False
    )
    op.create_index("ix_appointments_contact_id", "appointments", ["contact_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_appointments_contact_id", table_name="appointments")
    op.drop_index("ix_appointments_calendar_id_start", table_name="appointments")
    op.drop_table("appointments")
    op.drop_table("calendars")
    op.create_table(
        "appointments",
        sa.Column(
            "id", pg.UUID(as_uuid=True), server_default=sa.text("gen_random_uuid()"), nullable=False
        ),
        sa.Column("contact_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("starts_at", sa.TIMESTAMP(timezone=True), nullable=True),
        sa.Column("ends_at", sa.TIMESTAMP(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["contact_id"],
            ["contacts.id"],
            name=op.f("fk_appointments_contact_id_contacts"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_appointments")),
    )
    op.create_index(
        op.f("ix_appointments_contact_id"), "appointments", ["contact_id"], unique=False
    )
