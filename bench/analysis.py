"""Post-call analysis throughput (issue 25, point 11).

BENCH_ANALYSIS_CALLS (200) calls end at once (finish_call with a short transcript, as the voice
runtime records them: each writes its `pending` analysis and its `call_analysis` due-work row),
then a worker (the real arq worker of `switchboard worker`, in this process) analyses them
against the fake OpenAI vendor answering each request after BENCH_ANALYSIS_LATENCY_MS (500).
Measured: calls analysed per minute, from the worker's start to the last analysis recorded,
against the ideal for that latency and the worker's analysis concurrency (cli/wiring.py
SWITCHBOARD_ANALYSIS_CONCURRENCY runs at once: concurrency x 60 / latency per minute).
Run: `python -m bench.analysis`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from time import perf_counter
from typing import Any

from bench.common import agent_body, bench_servers, write_section
from bench.contacts.__main__ import new_sub_account
from tenancy.migrate import upgrade_control

CALLS = int(os.environ.get("BENCH_ANALYSIS_CALLS", "200"))
LATENCY_MS = int(os.environ.get("BENCH_ANALYSIS_LATENCY_MS", "500"))
PREFIX = "/webhooks/inbound"
MESSAGES = [
    {"role": "agent", "text": "Hi, this is Sam. Do you have a minute?", "start_seconds": 0.5},
    {"role": "contact", "text": "Yes, tell me more.", "start_seconds": 2.0},
    {"role": "agent", "text": "We offer a free demo next week.", "start_seconds": 3.5},
    {"role": "contact", "text": "Sounds good, goodbye.", "start_seconds": 6.0},
]
ANALYSIS = {
    "summary": True,
    "success_criteria": "The contact agreed to a demo.",
    "data_schema": {
        "type": "object",
        "required": ["interested"],
        "properties": {"interested": {"type": "boolean"}, "note": {"type": "string"}},
    },
}


async def _ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code in (status, 201), await response.get_data(as_text=True)
    return await response.get_json()  # type: ignore[no-any-return]


async def run(url: str, redis_url: str) -> dict[str, Any]:
    from arq.worker import Worker

    from api.calls.service import finish_call
    from cli.wiring import build_app, worker_settings
    from integrations.telephony import CallState
    from tenancy.db import create_pool, tenant_transaction
    from tenancy.scope import TenantScope
    from tenancy.settings import get_settings
    from voice.fake_vendors import FakeVendors

    vendors = FakeVendors(llm_first_token_ms=LATENCY_MS)
    await vendors.start()
    os.environ.update(
        {
            **vendors.env,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "100000000",
        }
    )
    get_settings.cache_clear()
    pool = await create_pool(url, min_size=1, max_size=10)
    try:
        key, schema = await new_sub_account(pool, "Analysis")
        sub_account_id = uuid.UUID(schema.removeprefix("t_"))
        app = build_app()
        async with app.test_app() as test_app:
            client = test_app.test_client()
            headers = {"x-api-key": key}
            await _ok(
                await client.put(
                    f"{PREFIX}/integrations/openai", json={"api_key": "sk-bench"}, headers=headers
                )
            )
            agent = await _ok(
                await client.post(
                    "/functions/v1/crm-api/create-agent",
                    json=agent_body(
                        sub_account_id,
                        await _organisation(pool, sub_account_id),
                        llm_model="gpt-4o-mini",
                        analysis=ANALYSIS,
                    ),
                    headers=headers,
                ),
                201,
            )
            contact = await _ok(
                await client.post(
                    f"{PREFIX}/contacts",
                    json={"name": "Bench Contact", "phone": "+14155552671"},
                    headers=headers,
                ),
                201,
            )
        async with tenant_transaction(pool, schema) as conn:
            ids = [
                row["id"]
                for row in await conn.fetch(
                    "INSERT INTO calls (contact_id, agent_id, from_number, to_number, provider, "
                    "status, answered_by) SELECT $1, $2, '+14155550123', '+14155552671', "
                    "'sandbox', 'in_progress', 'human' FROM generate_series(1, $3) RETURNING id",
                    uuid.UUID(contact["contact_id"]),
                    uuid.UUID(agent["id"]),
                    CALLS,
                )
            ]
        scope = TenantScope(pool, sub_account_id, schema)
        state = CallState(
            "completed",
            duration_seconds=30,
            messages=MESSAGES,
            transcript="\n".join(f"{m['role'].title()}: {m['text']}" for m in MESSAGES),
            answered_by="human",
        )
        for call_id in ids:
            await finish_call(scope, call_id, state)
        worker = Worker(
            **worker_settings(url, redis_url, burst=False, poll_delay=0.05, handle_signals=False)
        )
        started = perf_counter()
        task = asyncio.create_task(worker.async_run())
        try:
            while True:
                async with tenant_transaction(pool, schema) as conn:
                    left = await conn.fetchval(
                        "SELECT count(*) FROM calls WHERE analysis->>'status' = 'pending'"
                    )
                if left == 0:
                    break
                await asyncio.sleep(0.05)
            seconds = perf_counter() - started
            async with tenant_transaction(pool, schema) as conn:
                done = await conn.fetchval(
                    "SELECT count(*) FROM calls WHERE analysis->>'status' = 'completed'"
                )
        finally:
            worker.allow_pick_jobs = False
            with contextlib.suppress(asyncio.CancelledError):
                await worker.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    finally:
        await pool.close()
        await vendors.stop()
    per_minute = CALLS / seconds * 60
    concurrency = get_settings().analysis_concurrency
    ideal = concurrency * 60 / (LATENCY_MS / 1000)
    return {
        "calls": CALLS,
        "completed": done,
        "seconds": seconds,
        "per_minute": per_minute,
        "ideal": ideal,
        "concurrency": concurrency,
        "asked": len(vendors.requests_for("openai", "llm")),
    }


async def _organisation(pool: Any, sub_account_id: uuid.UUID) -> str:
    return str(
        await pool.fetchval(
            "SELECT organisation_id FROM control.sub_accounts WHERE id = $1", sub_account_id
        )
    )


def report(result: dict[str, Any], load: float) -> str:
    return (
        "Command: `python -m bench.analysis` (BENCH_ANALYSIS_CALLS, BENCH_ANALYSIS_LATENCY_MS).\n\n"
        f"{result['calls']} ended calls analysed by one worker against the fake OpenAI vendor "
        f"answering each request after {LATENCY_MS} ms, the worker's analysis queue running "
        f"{result['concurrency']} at once (load average {load:.1f} at the start, 2 cores "
        "shared with other work).\n\n"
        "| calls | completed | vendor requests | seconds | analysed / min | ideal / min | "
        "of ideal |\n|---|---|---|---|---|---|---|\n"
        f"| {result['calls']} | {result['completed']} | {result['asked']} | "
        f"{result['seconds']:.1f} | {result['per_minute']:.0f} | {result['ideal']:.0f} | "
        f"{result['per_minute'] / result['ideal']:.0%} |\n\n"
        "Ideal: concurrency x 60 s / latency. Each analysis is one vendor request; the rest "
        "(claim, reload, record, the call.analyzed event, the due-work bookkeeping) is what "
        "separates the measured rate from the ideal.\n"
    )


def main() -> None:
    load = os.getloadavg()[0]
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)
        print(f"analysing {CALLS} calls at {LATENCY_MS} ms per request", file=sys.stderr)
        result = asyncio.run(run(url, redis_url))
    body = report(result, load)
    write_section("Post-call analysis", body)
    print(body)


if __name__ == "__main__":
    main()
