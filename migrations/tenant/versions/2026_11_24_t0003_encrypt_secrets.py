"""encrypt stored secrets: LLM keys, agent and subscription webhook secrets, delivery secrets

Revision ID: t0003
Revises: t0002
Create Date: 2026-11-24 05:45:00.000000

Needs SWITCHBOARD_SECRETS_KEY (CONTRACT 8): every value is encrypted under its first key.
"""

from collections.abc import Sequence

from alembic import op

from migrations.secret_columns import decrypt_all, encrypt_all
from tenancy.secrets import SecretColumn

revision: str = "t0003"
down_revision: str | None = "t0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The secret columns as they stood at this revision: later ones (t0013's tools) do not exist
# yet when it runs, nor any more when a downgrade comes back through it.
COLUMNS = (
    SecretColumn("integrations", ("provider",), "api_key"),
    SecretColumn("agents", ("id",), "webhook_secret"),
    SecretColumn("webhook_subscriptions", ("id",), "secret"),
    SecretColumn("webhook_deliveries", ("id",), "target_secret"),
)


def upgrade() -> None:
    # The tenant's schema is first on the search_path for the migration's transaction.
    encrypt_all(op.get_bind(), None, COLUMNS)


def downgrade() -> None:
    decrypt_all(op.get_bind(), None, COLUMNS)
