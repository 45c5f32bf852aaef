"""Campaign sends, run by the due-work engine (jobs/due.py) at each campaign's start_date."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.campaigns.delivery import run_campaign
from api.campaigns.service import SEND_KIND
from jobs.due import DueWork, register
from tenancy.settings import get_settings


@register(SEND_KIND, lease_seconds=get_settings().campaign_lease_seconds)
async def send_campaign(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    """Send the campaign `work.ref_id`; the due row is kept while anything is left to send."""
    return await run_campaign(ctx["db"], ctx["database_url"], work.sub_account_id, work.ref_id)
