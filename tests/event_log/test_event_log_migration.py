"""t0006 on a tenant that already sent events: their events enter the log, and post-call
deliveries are tied to their agent."""

from __future__ import annotations

import json
import uuid

from alembic import command
from sqlalchemy import create_engine, pool, text

from tenancy.schema import alembic_config, sqlalchemy_url

AGENT_ID = uuid.uuid4()
BODY = {
    "type": "call.completed",
    "timestamp": "2026-11-20T10:00:00.123Z",
    "data": {"sub_account_id": "s", "call": {"id": "c", "agent_id": str(AGENT_ID)}},
}
CONTACT_BODY = {
    "type": "contact.updated",
    "timestamp": "2026-11-21T10:00:00.000Z",
    "data": {"contact": {"id": "x"}},
}


def _run(url: str, schema: str, *statements: tuple[str, dict[str, object]]) -> list[list[tuple]]:
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    results = []
    with engine.begin() as conn:
        conn.execute(text("SELECT set_config('search_path', :p, true)"), {"p": f'"{schema}"'})
        for statement, values in statements:
            result = conn.execute(text(statement), values)
            results.append(list(result) if result.returns_rows else [])
    engine.dispose()
    return results


def test_t0006_logs_earlier_events_and_ties_post_call_deliveries(migrated: str) -> None:
    schema = f"t_{uuid.uuid4().hex}"
    cfg = alembic_config("tenant", migrated)
    cfg.attributes["schema"] = schema
    command.upgrade(cfg, "t0004")
    try:
        _run(
            migrated,
            schema,
            (
                "INSERT INTO agents (id, name, voice_id, max_duration, temperature,"
                " silence_timeout, voice_activity_timeout, llm_model, language, background_noise,"
                " voicemail_detection, backcchanneling, webhook, webhook_url, webhook_secret,"
                " recording) VALUES (:id, 'a', 'alloy', 5, 0.5, 5, 300, 'gpt-4o', 'en-US', false,"
                " false, false, true, 'https://example.com/a', 's', false)",
                {"id": AGENT_ID},
            ),
            (
                "INSERT INTO webhook_deliveries (target_url, target_secret, event_type, message_id,"
                " body) VALUES ('https://example.com/a', 's', 'call.completed', 'msg_1', :body)",
                {"body": json.dumps(BODY)},
            ),
            *[
                (
                    "WITH s AS (INSERT INTO webhook_subscriptions (url, events, secret) VALUES"
                    " ('https://example.com/s', ARRAY['contact.updated'], 's') RETURNING id)"
                    " INSERT INTO webhook_deliveries"
                    " (subscription_id, event_type, message_id, body)"
                    " SELECT id, 'contact.updated', 'msg_2', :body FROM s",
                    {"body": json.dumps(CONTACT_BODY)},
                )
                for _ in range(2)
            ],
        )
        command.upgrade(cfg, "head")
        events, deliveries = _run(
            migrated,
            schema,
            ("SELECT id, type, timestamp, data FROM events ORDER BY id", {}),
            ("SELECT message_id, agent_id FROM webhook_deliveries ORDER BY message_id", {}),
        )
        assert [(row[0], row[1], row[3]) for row in events] == [
            ("msg_1", "call.completed", BODY["data"]),
            ("msg_2", "contact.updated", CONTACT_BODY["data"]),
        ]
        assert events[0][2].isoformat() == "2026-11-20T10:00:00.123000+00:00"
        assert deliveries == [("msg_1", AGENT_ID), ("msg_2", None), ("msg_2", None)]
    finally:
        _run(migrated, "public", (f'DROP SCHEMA "{schema}" CASCADE', {}))
