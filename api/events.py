"""Outbound events: `emit` records an event for delivery in the caller's tenant transaction.

The delivery engine (webhook subscriptions, outbox, signed and retried delivery by the worker)
implements this; callers only ever use `emit`.
"""

from __future__ import annotations

from typing import Any

import asyncpg


async def emit(conn: asyncpg.Connection, event_type: str, data: dict[str, Any]) -> None:
    """Queue `event_type` with `data` for every subscription that wants it (same transaction)."""
    raise NotImplementedError("the delivery engine is not built yet")
