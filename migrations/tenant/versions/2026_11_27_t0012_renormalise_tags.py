"""tags renormalised (CONTRACT 11): stored contact and smart-list tags were only trimmed and
lowercased; they become NFKC without zero-width characters, trimmed, lowercased, then NFC, as
the API now writes and matches them, so a stored fullwidth, decomposed or zero-width look-alike
is found, removed and listed as the one tag it is. Only rows holding a non-ASCII character can
change (the old rule already gave ASCII its final form); a smart list left without tags is kept
as it was (it would match nothing). Not reversible: the look-alikes were meant as one tag.

Revision ID: t0012
Revises: t0011
Create Date: 2026-11-27 13:00:00.000000
"""

import unicodedata
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "t0012"
down_revision: str | None = "t0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The rule as it stood when this migration was written (api/contacts/service.py: normalise_tag).
ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
BATCH = 1000


def normalise(tags: list[str]) -> list[str]:
    forms = (
        unicodedata.normalize(
            "NFC", unicodedata.normalize("NFKC", tag).translate(ZERO_WIDTH).strip().lower()
        )
        for tag in tags
    )
    return list(dict.fromkeys(form for form in forms if form))


def renormalise(table: str, *, keep_empty: bool) -> None:
    bind = op.get_bind()
    after = None
    while True:
        rows = bind.execute(
            sa.text(
                f"SELECT id, tags FROM {table} "
                "WHERE array_to_string(tags, '') ~ '[^\\x01-\\x7f]' AND (CAST(:after AS uuid) IS NULL "
                "OR id > CAST(:after AS uuid)) ORDER BY id LIMIT :batch"
            ),
            {"after": after, "batch": BATCH},
        ).all()
        changed = [
            {"id": row.id, "tags": tags}
            for row in rows
            if (tags := normalise(row.tags)) != row.tags and (tags or keep_empty)
        ]
        if changed:
            bind.execute(sa.text(f"UPDATE {table} SET tags = :tags WHERE id = :id"), changed)
        if len(rows) < BATCH:
            return
        after = str(rows[-1].id)


def upgrade() -> None:
    renormalise("contacts", keep_empty=True)
    renormalise("smart_lists", keep_empty=False)


def downgrade() -> None:
    pass
