"""Following a call: the durable scheduler runs `call` work (one row per call), so an accepted
call is never lost. Registered in cli/wiring.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.calls import service as calls
from integrations.telephony import Providers
from tenancy.due import DueWork


async def advance_call(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    providers = Providers(ctx["settings"].telephony)
    try:
        return await calls.advance_call(work.scope(ctx["db"]), providers, work.ref_id)
    finally:
        await providers.aclose()
