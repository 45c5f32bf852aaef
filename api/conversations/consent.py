"""What an inbound text means for the contact's consent (CONTRACT 7 "Consent")."""

from __future__ import annotations

import uuid

import asyncpg

from api.conversations import queries

STOP_WORDS = {"stop", "stopall", "unsubscribe", "cancel", "end", "quit"}


async def on_inbound_text(conn: asyncpg.Connection, contact_id: uuid.UUID, body: str) -> None:
    """Called once for every new inbound text, in the transaction that stores it.

    Consent keyword rules (STOP, START and their synonyms, CONTRACT 7) plug in here. Until they
    do, STOP and its synonyms keep the earlier rule: an unsubscribe from SMS campaigns.
    """
    if body.strip().lower() in STOP_WORDS:
        await conn.execute(queries.UNSUBSCRIBE, contact_id, "sms")
