"""Migration t0008: every stored unsubscribe becomes a revoked consent row, and back."""

from __future__ import annotations

import uuid

from alembic import command

from tenancy.schema import alembic_config
from tests.tenancy.test_migrations import _drop_schema, _sql


def _migrate(url: str, schema: str, revision: str, *, down: bool = False) -> None:
    cfg = alembic_config("tenant", url)
    cfg.attributes["schema"] = schema
    (command.downgrade if down else command.upgrade)(cfg, revision)


def test_unsubscribes_become_revoked_consent_rows_and_return_on_downgrade(migrated: str) -> None:
    schema = f"t_{uuid.uuid4().hex}"
    emailed, texted, untouched = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    try:
        _migrate(migrated, schema, "t0007")
        for contact, email in (
            (emailed, "e@example.com"),
            (texted, "t@example.com"),
            (untouched, "u@example.com"),
        ):
            _sql(
                migrated,
                f'INSERT INTO "{schema}".contacts (id, email) VALUES (:id, :email)',
                id=contact,
                email=email,
            )
        _sql(
            migrated,
            f'INSERT INTO "{schema}".unsubscribes (contact_id, channel, created_at) '
            "VALUES (:e, 'email', '2026-01-02T03:04:05Z'), (:t, 'sms', now())",
            e=emailed,
            t=texted,
        )

        _migrate(migrated, schema, "t0008")

        rows = _sql(
            migrated,
            f"SELECT contact_id, channel, status, source, updated_at FROM "
            f'"{schema}".contact_consents ORDER BY channel',
        )
        assert [tuple(row[:4]) for row in rows] == [
            (emailed, "email", "revoked", "unsubscribe_link"),
            (texted, "sms", "revoked", "inbound_keyword"),
        ]
        assert rows[0][4].isoformat().startswith("2026-01-02T03:04:05")
        assert not _sql(migrated, "SELECT to_regclass(:t) IS NOT NULL", t=f"{schema}.unsubscribes")[
            0
        ][0]

        _migrate(migrated, schema, "t0007", down=True)
        back = _sql(
            migrated, f'SELECT contact_id, channel FROM "{schema}".unsubscribes ORDER BY channel'
        )
        assert [tuple(row) for row in back] == [(emailed, "email"), (texted, "sms")]
    finally:
        _drop_schema(migrated, schema)
