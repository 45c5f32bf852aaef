"""The `call_analysis` due work (one row per ended call that has something to analyse): asks the
agent's model once the call has ended, retried by the due-work engine with backoff while the
vendor fails; the last allowed try records `failed` instead (service.py). Registered in
cli/wiring.py on a queue of its own."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.analysis import service as analysis
from api.calls import service as calls
from tenancy.due import DueWork


async def analyse_call(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    await analysis.run_analysis(
        work.scope(ctx["db"]),
        work.ref_id,
        analysis.last_try(work.failures),
        calls.call_out,
        calls.SELECT_CALL,
    )
    return None
