"""Campaign runs, by the due-work engine (jobs/due.py), registered in cli/wiring.py: message
campaigns are sent at their start_date (`campaign_send`); call campaigns are dispatched
(`campaign_calls`) at their start_date and whenever one of their calls ends."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.calls.service import CAMPAIGN_CALLS_WORK
from api.campaigns.delivery import run_campaign
from api.campaigns.dialer import dial_campaign
from api.campaigns.service import SEND_KIND
from integrations.telephony import Providers
from tenancy.due import DueWork

__all__ = ["CAMPAIGN_CALLS_WORK", "SEND_KIND", "dial_call_campaign", "send_campaign"]


async def send_campaign(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    """Send the campaign `work.ref_id`; the due row is kept while anything is left to send."""
    return await run_campaign(work.scope(ctx["db"]), ctx["database_url"], work.ref_id)


async def dial_call_campaign(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    """Settle and place the calls of the call campaign `work.ref_id` (api/campaigns/dialer.py);
    the due row is kept while calls are on the line or recipients are left to call."""
    providers = Providers(ctx["settings"].telephony)
    try:
        return await dial_campaign(work.scope(ctx["db"]), work.ref_id, providers)
    finally:
        await providers.aclose()
