"""encrypt stored secrets: organisation SMTP passwords and stored idempotent answers

Revision ID: c0005
Revises: c0004
Create Date: 2026-11-24 05:45:00.000000

Needs SWITCHBOARD_SECRETS_KEY (CONTRACT 8): every value is encrypted under its first key.
"""

from collections.abc import Sequence

from alembic import op

from migrations.secret_columns import decrypt_all, encrypt_all
from tenancy.secrets import CONTROL_SECRETS

revision: str = "c0005"
down_revision: str | None = "c0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    encrypt_all(op.get_bind(), "control", CONTROL_SECRETS)


def downgrade() -> None:
    decrypt_all(op.get_bind(), "control", CONTROL_SECRETS)
