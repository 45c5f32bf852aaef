"""Scheduled messages (CONTRACT 10 `send_at`): the durable scheduler runs `message_send` work
(one row per message, due at its send_at) through `service.send_scheduled`. Registered in
cli/wiring.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.conversations import service
from tenancy.due import DueWork

SELECT_ORGANISATION = "SELECT organisation_id FROM control.sub_accounts WHERE id = $1"


async def send_scheduled_message(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    scope = work.scope(ctx["db"])
    organisation_id = await scope.pool.fetchval(SELECT_ORGANISATION, scope.sub_account_id)
    return await service.send_scheduled(scope, organisation_id, work.ref_id)
