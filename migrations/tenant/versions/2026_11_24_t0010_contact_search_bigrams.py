"""contact search: indexes of every 2-character piece of name, email and phone, for a 2-character
`q` (public.switchboard_bigrams, set up by the control migrations' environment); the search's GIN
indexes keep a pending list of 256 kB

Revision ID: t0010
Revises: t0009
Create Date: 2026-11-24 20:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "t0010"
down_revision: str | None = "t0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As tenancy/tables/contacts.py writes them (a migration keeps its own copy).
TEXT_BIGRAMS = "(public.switchboard_bigrams(lower(name)) || public.switchboard_bigrams(email))"
PHONE_BIGRAMS = "public.switchboard_bigrams(phone)"
# A search reads a GIN index's whole pending list: 256 kB instead of 4 MB bounds that.
SEARCH_GIN = {"gin_pending_list_limit": 256}
TRIGRAM = ("name", "email", "phone")


def upgrade() -> None:
    op.create_index(
        "ix_contacts_text_bigrams",
        "contacts",
        [sa.text(TEXT_BIGRAMS)],
        unique=False,
        postgresql_using="gin",
        postgresql_with=SEARCH_GIN,
    )
    op.create_index(
        "ix_contacts_phone_bigrams",
        "contacts",
        [sa.text(PHONE_BIGRAMS)],
        unique=False,
        postgresql_using="gin",
        postgresql_with=SEARCH_GIN,
    )
    for column in TRIGRAM:
        op.execute(f"ALTER INDEX ix_contacts_{column}_trgm SET (gin_pending_list_limit = 256)")


def downgrade() -> None:
    for column in TRIGRAM:
        op.execute(f"ALTER INDEX ix_contacts_{column}_trgm RESET (gin_pending_list_limit)")
    op.drop_index("ix_contacts_phone_bigrams", table_name="contacts")
    op.drop_index("ix_contacts_text_bigrams", table_name="contacts")
