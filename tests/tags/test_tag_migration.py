"""t0012 on a tenant holding tags stored under the old rule (trimmed and lowercased only): they
take the form the API now writes and matches (CONTRACT 11), de-duplicated in first-seen order."""

from __future__ import annotations

import unicodedata
import uuid

from alembic import command

from tenancy.schema import alembic_config
from tests.event_log.test_event_log_migration import _run

CAFE_NFD = unicodedata.normalize("NFD", "caf\u00e9")
CAFE_NFC = unicodedata.normalize("NFC", "caf\u00e9")
STORED = {
    "look-alikes": (
        ["\uff56\uff49\uff50", "vip", CAFE_NFD, "le\u200bad", "plain"],
        ["vip", CAFE_NFC, "lead", "plain"],
    ),
    "ascii": (["vip", "lead"], ["vip", "lead"]),
    "only zero-width": (["\u200b", "\ufeff"], []),
    "none": ([], []),
}


def test_t0012_renormalises_stored_contact_and_smart_list_tags(migrated: str) -> None:
    schema = f"t_{uuid.uuid4().hex}"
    cfg = alembic_config("tenant", migrated)
    cfg.attributes["schema"] = schema
    command.upgrade(cfg, "t0011")
    ids = {label: uuid.uuid4() for label in STORED}
    try:
        _run(
            migrated,
            schema,
            *[
                (
                    "INSERT INTO contacts (id, name, tags) VALUES (:id, :name, :tags)",
                    {"id": ids[label], "name": label, "tags": before},
                )
                for label, (before, _) in STORED.items()
            ],
            *[
                (
                    "INSERT INTO smart_lists (id, name, tags) VALUES (:id, :name, :tags)",
                    {"id": ids[label], "name": label, "tags": before},
                )
                for label, (before, _) in STORED.items()
            ],
        )
        command.upgrade(cfg, "t0012")
        contacts, smart_lists = _run(
            migrated,
            schema,
            ("SELECT id, tags FROM contacts", {}),
            ("SELECT id, tags FROM smart_lists", {}),
        )
        assert dict(contacts) == {ids[label]: after for label, (_, after) in STORED.items()}
        # A smart list is never left without tags (it would match nothing): kept as it was.
        assert dict(smart_lists) == {
            ids[label]: after or before for label, (before, after) in STORED.items()
        }
    finally:
        _run(migrated, "public", (f'DROP SCHEMA "{schema}" CASCADE', {}))
