"""The durable scheduler index: one row per piece of work that must run at or after `due_at`.

arq runs the work; this table remembers it. A row is unique per (kind, ref_id): scheduling again
replaces the time. `version` grows on every (re)schedule and claim, and the arq job id is derived
from (id, version), so an old queued job finds a newer version and does nothing.
A row whose runs keep failing (`failures` in a row reaching `SWITCHBOARD_DUE_WORK_MAX_FAILURES`)
becomes `failed`: kept with its reason for an operator, never run or swept again until retried.
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from tenancy.tables.base import control_metadata, created_at, updated_at, uuid_pk

UUID = pg.UUID(as_uuid=True)
TIMESTAMP = sa.TIMESTAMP(timezone=True)

due_work = sa.Table(
    "due_work",
    control_metadata,
    uuid_pk(),
    sa.Column(
        "sub_account_id",
        UUID,
        sa.ForeignKey("sub_accounts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("ref_id", UUID, nullable=False),
    sa.Column("due_at", TIMESTAMP, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="1"),
    # Claims so far (a worker that died mid-run shows here as a claim without an outcome).
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    # A claimed row is leased to one worker until this time; afterwards it may be claimed again.
    sa.Column("claimed_until", TIMESTAMP),
    # The version the current lease was taken at: only that claim may release it early.
    sa.Column("claimed_version", sa.BigInteger),
    # "ExceptionClass: message" of the last failed run (timeouts and cancellations as such).
    sa.Column("last_error", sa.Text),
    # pending: waiting or running; failed: set aside after too many failed runs in a row.
    sa.Column("status", sa.Text, nullable=False, server_default="pending"),
    # Failed runs since the last one that succeeded (a raised error, a timeout, a cancellation,
    # or a lease that ran out without an outcome).
    sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failed_at", TIMESTAMP),
    created_at(),
    updated_at(),
    sa.UniqueConstraint("kind", "ref_id"),
    sa.CheckConstraint("status IN ('pending', 'failed')", name="status"),
    sa.CheckConstraint("(status = 'failed') = (failed_at IS NOT NULL)", name="failed_at"),
    sa.Index("ix_due_work_due_at", "due_at"),
    sa.Index("ix_due_work_failed_at", "failed_at", postgresql_where=sa.text("status = 'failed'")),
)
