"""t0011 on a tenant that already kept events and redelivered: events get their place in the
stream in order of timestamp (then id) and new ones come after them; the last hour's
redeliveries name their original; the downgrade undoes it."""

from __future__ import annotations

import uuid

from alembic import command

from tenancy.schema import alembic_config
from tests.event_log.test_event_log_migration import _run

EVENTS = [
    ("msg_b", "2026-11-20T10:00:00.002Z"),
    ("msg_c", "2026-11-20T10:00:00.001Z"),
    ("msg_a", "2026-11-20T10:00:00.002Z"),
]

INSERT_DELIVERY = (
    "INSERT INTO webhook_deliveries (id, target_url, target_secret, event_type, message_id, body,"
    " status, created_at) VALUES (:id, :url, 's', 'call.completed', :message, '{}', 'delivered',"
    " now() - CAST(:age AS interval))"
)


def test_t0011_numbers_events_and_ties_recent_redeliveries(migrated: str) -> None:
    schema = f"t_{uuid.uuid4().hex}"
    cfg = alembic_config("tenant", migrated)
    cfg.attributes["schema"] = schema
    command.upgrade(cfg, "t0010")
    first, again, other_target, old_first, old_again = (uuid.uuid4() for _ in range(5))
    try:
        _run(
            migrated,
            schema,
            *[
                (
                    "INSERT INTO events (id, type, timestamp, data) VALUES (:id, 'contact.created',"
                    " CAST(:at AS timestamptz), '{}')",
                    {"id": id_, "at": at},
                )
                for id_, at in EVENTS
            ],
            *[
                (INSERT_DELIVERY, {"id": id_, "url": url, "message": message, "age": age})
                for id_, url, message, age in [
                    (first, "https://example.com/a", "msg_1", "50 minutes"),
                    (again, "https://example.com/a", "msg_1", "10 minutes"),
                    (other_target, "https://example.com/b", "msg_1", "5 minutes"),
                    (old_first, "https://example.com/a", "msg_2", "3 hours"),
                    (old_again, "https://example.com/a", "msg_2", "2 hours"),
                ]
            ],
        )
        command.upgrade(cfg, "t0011")
        events, deliveries, new = _run(
            migrated,
            schema,
            ("SELECT id, position FROM events ORDER BY position", {}),
            ("SELECT id, original_delivery_id FROM webhook_deliveries", {}),
            (
                "INSERT INTO events (id, type, timestamp, data) VALUES ('msg_d', 'contact.created',"
                " now(), '{}') RETURNING position",
                {},
            ),
        )
        assert events == [("msg_c", 1), ("msg_a", 2), ("msg_b", 3)]
        assert dict(deliveries) == {
            first: None,
            again: first,
            other_target: None,
            old_first: None,
            old_again: None,
        }
        assert new == [(4,)]
        command.downgrade(cfg, "t0010")
        [columns] = _run(
            migrated,
            schema,
            (
                "SELECT column_name FROM information_schema.columns WHERE table_schema = :s"
                " AND table_name IN ('events', 'webhook_deliveries')"
                " AND column_name IN ('position', 'original_delivery_id')",
                {"s": schema},
            ),
        )
        assert columns == []
    finally:
        _run(migrated, "public", (f'DROP SCHEMA "{schema}" CASCADE', {}))
