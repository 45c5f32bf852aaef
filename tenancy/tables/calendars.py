"""Calendars (bookable hours in a timezone) and their appointments.

The database keeps the booked appointments of one calendar from overlapping: an exclusion
constraint on (calendar_id, tstzrange(start, end)) over booked rows, with btree_gist (in schema
public, set up by control revision c0010) for the uuid equality. Its gist index also serves the
free-slot query (a calendar's booked appointments over a span of time).
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import created_at, tenant_metadata, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)
TIMESTAMP = sa.TIMESTAMP(timezone=True)

calendars = sa.Table(
    "calendars",
    tenant_metadata,
    uuid_pk(),
    sa.Column("name", sa.Text, nullable=False),
    # An IANA name (zoneinfo); availability windows are wall-clock times there.
    sa.Column("timezone", sa.Text, nullable=False),
    sa.Column("slot_minutes", sa.Integer, nullable=False, server_default="30"),
    sa.Column("buffer_minutes", sa.Integer, nullable=False, server_default="0"),
    sa.Column("min_notice_minutes", sa.Integer, nullable=False, server_default="60"),
    sa.Column("max_days_ahead", sa.Integer, nullable=False, server_default="60"),
    # [{"day": "mon".."sun", "start": "HH:MM", "end": "HH:MM"}], 1 to 50 windows.
    sa.Column("availability", pg.JSONB, nullable=False),
    # [{"minutes_before", "channel", "template", "subject"}], at most 5.
    sa.Column("reminders", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    created_at(),
    updated_at(),
    sa.CheckConstraint("slot_minutes BETWEEN 5 AND 480", name="slot_minutes"),
    sa.CheckConstraint("buffer_minutes BETWEEN 0 AND 240", name="buffer_minutes"),
    sa.CheckConstraint("min_notice_minutes BETWEEN 0 AND 43200", name="min_notice_minutes"),
    sa.CheckConstraint("max_days_ahead BETWEEN 1 AND 365", name="max_days_ahead"),
    sa.CheckConstraint("jsonb_typeof(availability) = 'array'", name="availability_array"),
    sa.CheckConstraint("jsonb_typeof(reminders) = 'array'", name="reminders_array"),
)

appointments = sa.Table(
    "appointments",
    tenant_metadata,
    uuid_pk(),
    # A calendar is deleted only when none of its booked appointments is still to come; its
    # past and cancelled ones go with it.
    sa.Column(
        "calendar_id", UUID, sa.ForeignKey("calendars.id", ondelete="CASCADE"), nullable=False
    ),
    # A contact with appointments cannot be deleted (409 contact_referenced).
    sa.Column(
        "contact_id", UUID, sa.ForeignKey("contacts.id", ondelete="RESTRICT"), nullable=False
    ),
    sa.Column("start", TIMESTAMP, nullable=False),
    sa.Column("end", TIMESTAMP, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="booked"),
    sa.Column("title", sa.Text),
    sa.Column("notes", sa.Text),
    sa.Column("source", sa.Text, nullable=False, server_default="api"),
    # The call whose agent booked it (source agent).
    sa.Column("call_id", UUID, sa.ForeignKey("calls.id")),
    # The reminders planned for the current start (api/appointments/tasks.py): [{index,
    # at, channel, template, subject, message_id, status: pending|sent|skipped|failed, reason}].
    sa.Column("reminders", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    created_at(),
    updated_at(),
    sa.CheckConstraint("status IN ('booked', 'cancelled')", name="status"),
    sa.CheckConstraint("source IN ('api', 'agent')", name="source"),
    sa.CheckConstraint('"end" > start', name="end_after_start"),
    pg.ExcludeConstraint(
        (sa.column("calendar_id"), "="),
        (sa.func.tstzrange(sa.column("start"), sa.column("end")), "&&"),
        name="ex_appointments_booked_overlap",
        using="gist",
        where=sa.text("status = 'booked'"),
    ),
    # A calendar's appointments by time (lists, the calendar_in_use check, the cascade).
    sa.Index("ix_appointments_calendar_id_start", "calendar_id", "start"),
    sa.Index("ix_appointments_contact_id", "contact_id"),
)
