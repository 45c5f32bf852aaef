"""Campaign sends, run by the due-work engine (jobs/due.py) at each campaign's start_date
(registered in cli/wiring.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.campaigns.delivery import run_campaign
from api.campaigns.service import SEND_KIND
from tenancy.due import DueWork

__all__ = ["SEND_KIND", "send_campaign"]


async def send_campaign(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    """Send the campaign `work.ref_id`; the due row is kept while anything is left to send."""
    return await run_campaign(work.scope(ctx["db"]), ctx["database_url"], work.ref_id)
