"""encrypt stored secrets: LLM keys, agent and subscription webhook secrets, delivery secrets

Revision ID: t0003
Revises: t0002
Create Date: 2026-11-24 05:45:00.000000

Needs SWITCHBOARD_SECRETS_KEY (CONTRACT 8): every value is encrypted under its first key.
"""

from collections.abc import Sequence

from alembic import op

from migrations.secret_columns import decrypt_all, encrypt_all
from tenancy.secrets import TENANT_SECRETS

revision: str = 't0003'
down_revision: str | None = 't0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The tenant's schema is first on the search_path for the migration's transaction.
    encrypt_all(op.get_bind(), None, TENANT_SECRETS)


def downgrade() -> None:
    decrypt_all(op.get_bind(), None, TENANT_SECRETS)
