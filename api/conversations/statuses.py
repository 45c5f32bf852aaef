"""Delivery statuses of outbound messages, as carriers report them (CONTRACT 9).

A status moves forward only (queued -> sent -> delivered | undelivered | failed) and each move
fires `message.status_updated`. A carrier may report on a message before the send that got its
id has stored it (Twilio's first callback can beat its own API answer): such a report is kept in
`message_status_reports` and applied by the send when it stores the id. A transaction lock on
the id orders the two, so a report is either applied at once or found by the send.
"""

from __future__ import annotations

import uuid

import asyncpg

from api import events
from api.conversations import queries

# The carrier's words as ours; the rank says which may follow which (forward only).
TWILIO_STATUSES = {
    "accepted": "queued",
    "scheduled": "queued",
    "queued": "queued",
    "sending": "sent",
    "sent": "sent",
    "delivered": "delivered",
    "read": "delivered",
    "undelivered": "undelivered",
    "failed": "failed",
    "canceled": "failed",
}
RANK = {"queued": 0, "sent": 1, "delivered": 2, "undelivered": 2, "failed": 2}


async def report(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    provider_message_id: str,
    status: str,
    error: str | None,
) -> bool:
    """A carrier's report on our outbound message: True when its status moved. A report on
    an id no message holds yet is kept for the send that will store it."""
    await conn.execute(queries.LOCK_PROVIDER_ID, provider_message_id)
    if await _advance(conn, sub_account_id, provider_message_id, status, error):
        return True
    if not await conn.fetchval(queries.OUTBOUND_KNOWN, provider_message_id):
        await conn.execute(queries.KEEP_REPORT, provider_message_id, status, error)
    return False


async def apply_early_reports(
    conn: asyncpg.Connection, sub_account_id: uuid.UUID, provider_message_id: str
) -> None:
    """Called by a send in the transaction that stores `provider_message_id`: the reports that
    came first move the message to the furthest status they name."""
    await conn.execute(queries.LOCK_PROVIDER_ID, provider_message_id)
    reports = await conn.fetch(queries.TAKE_REPORTS, provider_message_id)
    if reports:
        furthest = max(reports, key=lambda row: RANK[row["status"]])
        await _advance(
            conn, sub_account_id, provider_message_id, furthest["status"], furthest["error"]
        )


async def _advance(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    provider_message_id: str,
    status: str,
    error: str | None,
) -> bool:
    before = [name for name, rank in RANK.items() if rank < RANK[status]]
    message_id = await conn.fetchval(
        queries.ADVANCE_STATUS, provider_message_id, status, before, error
    )
    if message_id is None:
        return False
    message = queries.message_view(await conn.fetchrow(queries.SELECT_MESSAGE, message_id))
    await events.emit(
        conn, "message.status_updated", {"sub_account_id": sub_account_id, "message": message}
    )
    return True
