"""Conversations as a list (CONTRACT 7 "Conversations"): newest activity first, their messages
newest first, and marking a conversation read."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from api.conversations import queries
from tenancy.db import fetch_one_or_404
from tenancy.scope import TenantScope


def conversation_view(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "id": row["id"],
        "contact_id": row["contact_id"],
        "last_message_at": row["last_message_at"],
        "last_message_preview": row["last_message_preview"],
        "unread_count": row["unread_count"],
    }


async def list_conversations(
    scope: TenantScope, contact_id: uuid.UUID | None, unread: bool, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    async with scope.transaction() as conn:
        rows = await conn.fetch(queries.SELECT_CONVERSATIONS, contact_id, unread, limit, offset)
        total = await conn.fetchval(queries.COUNT_CONVERSATIONS, contact_id, unread)
    return [conversation_view(row) for row in rows], total


async def conversation_messages(
    scope: TenantScope, conversation_id: uuid.UUID, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    async with scope.transaction() as conn:
        await fetch_one_or_404(
            conn, queries.SELECT_CONVERSATION, conversation_id, what="conversation"
        )
        rows = await conn.fetch(
            queries.SELECT_CONVERSATION_MESSAGES, conversation_id, limit, offset
        )
        total = await conn.fetchval(queries.COUNT_CONVERSATION_MESSAGES, conversation_id)
    return [queries.message_view(row) for row in rows], total


async def mark_read(scope: TenantScope, conversation_id: uuid.UUID) -> dict[str, Any]:
    """Every inbound message of the conversation is read (unread_count 0)."""
    async with scope.transaction() as conn:
        await fetch_one_or_404(
            conn, queries.LOCK_CONVERSATION, conversation_id, what="conversation"
        )
        await conn.execute(queries.MARK_READ, conversation_id)
        row = await conn.fetchrow(queries.SELECT_CONVERSATION, conversation_id)
    return conversation_view(row)
