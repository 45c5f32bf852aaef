"""SQL of conversations and their messages: the message as conversations show it, inbound
texts, carrier status callbacks and the conversation list."""

from __future__ import annotations

from typing import Any

import asyncpg

# A message as GET /conversations/{id}/messages and message events show it (CONTRACT 9).
MESSAGE_COLUMNS = """
m.id, m.conversation_id, v.contact_id, m.content, m.subject, m.sender_type, m.message_type,
m.status, m.direction, m.provider_message_id, m.created_at, m.send_at, m.error
"""


def message_view(row: asyncpg.Record) -> dict[str, Any]:
    """A conversation message as GET /conversations/{id}/messages and events show it."""
    return {
        "id": row["id"],
        "conversation_id": row["conversation_id"],
        "contact_id": row["contact_id"],
        "content": row["content"],
        "subject": row["subject"],
        "sender_type": row["sender_type"],
        "message_type": row["message_type"],
        "status": row["status"],
        "direction": row["direction"],
        "delivery_status": row["status"],
        "provider_message_id": row["provider_message_id"],
        "timestamp": row["created_at"],
        "send_at": row["send_at"],
        "error": row["error"],
    }


SELECT_MESSAGE = f"""
SELECT {MESSAGE_COLUMNS}
FROM messages AS m JOIN conversations AS v ON v.id = m.conversation_id
WHERE m.id = $1
"""

# The conversation's last number while the sub-account still holds it, else its oldest active
# number; null when it holds none (the provider's default sender, TWILIO_SMS_FROM).
SELECT_SENDER_NUMBER = """
SELECT COALESCE(
    (SELECT p.phone_number
     FROM (SELECT m.phone_number FROM messages AS m
           JOIN conversations AS v ON v.id = m.conversation_id
           WHERE v.contact_id = $1 AND m.phone_number IS NOT NULL
           ORDER BY m.created_at DESC, m.seq DESC LIMIT 1) AS last
     JOIN phone_numbers AS p ON p.phone_number = last.phone_number AND p.is_active),
    (SELECT phone_number FROM phone_numbers WHERE is_active ORDER BY created_at, id LIMIT 1))
"""

# The contact's ($1) conversation, started or moved to the top by a new message.
CONVERSATION_CTE = """
conversation AS (
    INSERT INTO conversations (contact_id, last_message_at) VALUES ($1, now())
    ON CONFLICT (sub_account_id, contact_id)
    DO UPDATE SET last_message_at = now(), updated_at = now()
    RETURNING id
)
"""

APPEND_MESSAGE = f"""
WITH {CONVERSATION_CTE}
INSERT INTO messages
    (id, conversation_id, direction, sender_type, message_type, subject, content, status,
     campaign_id, provider_message_id, phone_number, send_at)
SELECT $2, conversation.id, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM conversation
"""

# Our number is kept only when the sub-account holds it.
INSERT_INBOUND = f"""
WITH {CONVERSATION_CTE}
INSERT INTO messages
    (conversation_id, direction, sender_type, message_type, content, status,
     provider_message_id, phone_number)
SELECT conversation.id, 'inbound', 'contact', 'sms', $2, 'received', $3,
       (SELECT phone_number FROM phone_numbers WHERE phone_number = $4 AND is_active)
FROM conversation
ON CONFLICT (sub_account_id, message_type, provider_message_id) WHERE direction = 'inbound'
DO NOTHING
RETURNING id
"""

SELECT_INBOUND = f"""
SELECT {MESSAGE_COLUMNS}
FROM messages AS m JOIN conversations AS v ON v.id = m.conversation_id
WHERE m.direction = 'inbound' AND m.message_type = 'sms' AND m.provider_message_id = $1
"""

# Forward only: $3 lists the statuses the new one may follow.
ADVANCE_STATUS = """
UPDATE messages SET status = $2, error = COALESCE($4, error), updated_at = now()
WHERE direction = 'outbound' AND provider_message_id = $1 AND status = ANY($3::text[])
RETURNING id
"""

CONVERSATION_COLUMNS = """
v.id, v.contact_id, v.last_message_at,
(SELECT left(m.content, 160) FROM messages AS m WHERE m.conversation_id = v.id
 ORDER BY m.created_at DESC, m.seq DESC LIMIT 1) AS last_message_preview,
(SELECT count(*) FROM messages AS m
 WHERE m.conversation_id = v.id AND m.direction = 'inbound' AND m.read_at IS NULL)
 AS unread_count
"""

# $1 contact or null; $2 true: only conversations with an unread message.
CONVERSATION_FILTER = """
($1::uuid IS NULL OR v.contact_id = $1)
AND (NOT $2 OR EXISTS (SELECT 1 FROM messages AS m WHERE m.conversation_id = v.id
                       AND m.direction = 'inbound' AND m.read_at IS NULL))
"""

SELECT_CONVERSATIONS = f"""
SELECT {CONVERSATION_COLUMNS}
FROM conversations AS v
WHERE {CONVERSATION_FILTER}
ORDER BY v.last_message_at DESC, v.id DESC
LIMIT $3 OFFSET $4
"""

COUNT_CONVERSATIONS = f"SELECT count(*) FROM conversations AS v WHERE {CONVERSATION_FILTER}"

SELECT_CONVERSATION = f"SELECT {CONVERSATION_COLUMNS} FROM conversations AS v WHERE v.id = $1"

SELECT_CONVERSATION_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS}
FROM messages AS m JOIN conversations AS v ON v.id = m.conversation_id
WHERE m.conversation_id = $1
ORDER BY m.created_at DESC, m.seq DESC
LIMIT $2 OFFSET $3
"""

COUNT_CONVERSATION_MESSAGES = "SELECT count(*) FROM messages WHERE conversation_id = $1"

# The conversation row is locked so a concurrent inbound text is either read here or after.
LOCK_CONVERSATION = "SELECT id FROM conversations WHERE id = $1 FOR UPDATE"

MARK_READ = """
UPDATE messages SET read_at = now(), updated_at = now()
WHERE conversation_id = $1 AND direction = 'inbound' AND read_at IS NULL
"""

# Early status reports (api/conversations/statuses.py): a transaction lock per carrier id orders
# a report and the send that stores the id.
LOCK_PROVIDER_ID = "SELECT pg_advisory_xact_lock(hashtext('message:' || $1))"

OUTBOUND_KNOWN = """
SELECT EXISTS (SELECT 1 FROM messages WHERE direction = 'outbound' AND provider_message_id = $1)
"""

KEEP_REPORT = """
INSERT INTO message_status_reports (provider_message_id, status, error) VALUES ($1, $2, $3)
ON CONFLICT (sub_account_id, provider_message_id, status) DO NOTHING
"""

TAKE_REPORTS = """
DELETE FROM message_status_reports WHERE provider_message_id = $1 RETURNING status, error
"""

# --- scheduled messages (CONTRACT 10) ---------------------------------------------------------

# The message and its contact, locked: its due run and a cancel re-read it here, one at a time.
LOCK_OUTBOUND = """
SELECT m.id, m.status, m.message_type, m.subject, m.content, m.send_at, m.phone_number,
       v.contact_id
FROM messages AS m JOIN conversations AS v ON v.id = m.conversation_id
WHERE m.id = $1 AND m.direction = 'outbound'
FOR UPDATE OF m
"""

# Charged and on its way: from now on the message is the run's to send (or a rerun's).
MARK_DUE = """
UPDATE messages SET status = 'queued', phone_number = $2, updated_at = now()
WHERE id = $1 AND status = 'scheduled'
"""

MARK_REFUSED = """
UPDATE messages SET status = 'failed', error = $2, updated_at = now()
WHERE id = $1 AND status = 'scheduled'
"""

MARK_CANCELLED = """
UPDATE messages SET status = 'cancelled', updated_at = now()
WHERE id = $1 AND status = 'scheduled'
"""

LOCK_ANY = "SELECT id, status FROM messages WHERE id = $1 FOR UPDATE"
