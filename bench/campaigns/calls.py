"""A call campaign of BENCH_CALL_RECIPIENTS (2,000) contacts whose numbers never answer (sandbox
`...0186`, SWITCHBOARD_SANDBOX_RING_SECONDS=1), max_concurrent_calls 50, end to end.

The real API (`switchboard serve`) creates the agent, its number, a smart list and the campaign
and schedules it a few seconds ahead; one worker (the `switchboard worker` of cli.wiring, run by
`python -m bench.campaigns call-worker` so that the dispatcher's own CPU can be metered) calls
every recipient through the sandbox carrier. Measured: start (started_at) to completed, against
the ideal recipients / concurrency x ring time; the campaign's calls on the line, sampled every
50 ms (never above 50); exactly one call per recipient; the CPU the dispatcher's runs spent (each
step of its coroutine timed with the thread's CPU clock) and the worker process's whole CPU, per
call.

Run: `python -m bench.campaigns call`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine, Generator
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.common import agent_body, bench_servers, free_port, serve, write_section
from bench.contacts.__main__ import new_sub_account
from tenancy.db import create_pool, tenant_transaction
from tenancy.migrate import upgrade_control

RECIPIENTS = int(os.environ.get("BENCH_CALL_RECIPIENTS", "2000"))
AT_ONCE = int(os.environ.get("BENCH_CALL_CONCURRENCY", "50"))
RING_SECONDS = float(os.environ.get("SWITCHBOARD_SANDBOX_RING_SECONDS", "1"))
TARGET_RATIO = 1.3
# `switchboard worker` processes serving the queues (each with its dispatcher metered).
WORKERS = int(os.environ.get("BENCH_CALL_WORKERS", "1"))
# arq's poll delay for the worker (its default, 0.5 s, unless set): how a run measures what the
# queues' polling costs.
POLL_DELAY = (
    float(os.environ["BENCH_WORKER_POLL_DELAY"])
    if "BENCH_WORKER_POLL_DELAY" in os.environ
    else None
)
# Area codes of the callees: each gives 800 numbers ending 0186 (exchanges 200..999).
AREA_CODES = ("415", "212", "312", "617")


# --- the metered worker (a process of its own) -------------------------------------------------


class Meter:
    """CPU seconds spent inside the coroutines it wraps, and how many it wrapped."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.runs = 0

    def wrap(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        self.runs += 1
        return _Metered(coroutine, self)


class _Metered:
    """Awaits `coroutine`, timing each of its steps (its own code only: never what other tasks
    run while it waits) with the thread's CPU clock."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any], meter: Meter) -> None:
        self.coroutine, self.meter = coroutine, meter

    def __await__(self) -> Generator[Any, Any, Any]:
        send: Any = None
        error: BaseException | None = None
        while True:
            started = time.thread_time()
            try:
                if error is not None:
                    yielded = self.coroutine.throw(error)
                else:
                    yielded = self.coroutine.send(send)
            except StopIteration as done:
                self.meter.cpu += time.thread_time() - started
                return done.value
            self.meter.cpu += time.thread_time() - started
            try:
                send, error = (yield yielded), None
            except BaseException as thrown:  # a cancellation, passed on to the coroutine
                send, error = None, thrown


def run_metered_worker(report: str) -> None:
    """`switchboard worker`, its call campaign handler metered; the meter is written to
    `report` when the worker stops (SIGTERM)."""
    from api.campaigns import tasks
    from cli.main import cmd_worker

    meter = Meter()
    handler = tasks.dial_call_campaign

    async def metered(ctx: dict[str, Any], work: Any) -> Any:
        return await meter.wrap(handler(ctx, work))

    tasks.dial_call_campaign = metered
    try:
        if POLL_DELAY is None:
            cmd_worker(type("Args", (), {"burst": False})())
        else:
            asyncio.run(_worker_polling_every(POLL_DELAY))
    finally:
        Path(report).write_text(json.dumps({"cpu": meter.cpu, "runs": meter.runs}))


async def _worker_polling_every(seconds: float) -> None:
    """The same worker with arq's poll delay (0.5 s by default) set to `seconds`."""
    from arq.worker import Worker

    from cli.main import _shutdown_event
    from cli.wiring import worker_settings
    from jobs.worker import serve

    database_url, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]

    def make_worker() -> Worker:
        return Worker(
            **worker_settings(database_url, redis_url, handle_signals=False, poll_delay=seconds)
        )

    await serve(make_worker, redis_url, _shutdown_event(), 10)


# --- the run -------------------------------------------------------------------------------------


def _callees() -> list[str]:
    numbers = [f"+1{npa}{exchange}0186" for npa in AREA_CODES for exchange in range(200, 1000)]
    assert len(numbers) >= RECIPIENTS, "not enough callee numbers"
    return numbers[:RECIPIENTS]


async def prepare(url: str) -> tuple[uuid.UUID, str, str]:
    """A sub-account on a plan of 100 calls at once, its key, and the callees (tagged)."""
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        key, schema = await new_sub_account(pool, "Bench")
        sub_account_id = uuid.UUID(schema.removeprefix("t_"))
        async with pool.acquire() as conn:
            plan_id = await conn.fetchval(
                "INSERT INTO control.plans (organisation_id, slug, name, max_concurrent_calls) "
                "SELECT organisation_id, 'bench', 'Bench', 100 FROM control.sub_accounts "
                "WHERE id = $1 RETURNING id",
                sub_account_id,
            )
            await conn.execute(
                "UPDATE control.sub_accounts SET plan_id = $2 WHERE id = $1",
                sub_account_id,
                plan_id,
            )
        async with tenant_transaction(pool, schema) as conn:
            await conn.executemany(
                "INSERT INTO contacts (name, phone, tags) VALUES ($1, $2, ARRAY['bench'])",
                [(f"Lead {n}", number) for n, number in enumerate(_callees())],
            )
    finally:
        await pool.close()
    return sub_account_id, schema, key


def set_up_campaign(client: httpx.Client, sub_account_id: uuid.UUID, organisation: str) -> str:
    """The agent with a number, a smart list of the callees and the call campaign (a draft)."""
    response = client.put("/webhooks/inbound/integrations/openai", json={"api_key": "sk-bench"})
    assert response.status_code == 200, response.text
    response = client.post(
        "/functions/v1/crm-api/create-agent",
        json=agent_body(sub_account_id, organisation, backcchanneling=True),
    )
    assert response.status_code == 201, response.text
    agent_id = response.json()["id"]
    response = client.post(
        "/webhooks/inbound/phone-numbers/import", json={"phone_number": "+14155550123"}
    )
    assert response.status_code == 201, response.text
    number_id = response.json()["phone_number"]["id"]
    response = client.post(
        f"/webhooks/inbound/phone-numbers/{number_id}/agent", json={"agent_id": agent_id}
    )
    assert response.status_code == 200, response.text
    response = client.post(
        "/webhooks/inbound/smart-lists", json={"name": "Bench", "tags": ["bench"]}
    )
    assert response.status_code == 201, response.text
    response = client.post(
        "/webhooks/inbound/campaigns",
        json={
            "name": "Bench calls",
            "campaign_type": "call",
            "agent_id": agent_id,
            "smart_list_id": response.json()["smart_list"]["id"],
            "max_concurrent_calls": AT_ONCE,
        },
    )
    assert response.status_code == 201, response.text
    return str(response.json()["campaign"]["id"])


class Sampler:
    """The campaign's calls queued, ringing or in progress, every 50 ms, in a thread."""

    def __init__(self, url: str, schema: str, campaign_id: str) -> None:
        self.url, self.schema, self.campaign_id = url, schema, uuid.UUID(campaign_id)
        self.samples: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        pool = await create_pool(self.url, min_size=1, max_size=1)
        try:
            while not self.stop.is_set():
                async with tenant_transaction(pool, self.schema) as conn:
                    self.samples.append(
                        await conn.fetchval(
                            "SELECT count(*) FROM calls WHERE campaign_id = $1 "
                            "AND status IN ('queued', 'ringing', 'in_progress')",
                            self.campaign_id,
                        )
                    )
                await asyncio.sleep(0.05)
        finally:
            await pool.close()


async def proof(url: str, schema: str, campaign_id: str) -> dict[str, Any]:
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        async with tenant_transaction(pool, schema) as conn:
            timing = await conn.fetchrow(
                "SELECT start_date, started_at, completed_at, status FROM campaigns WHERE id = $1",
                uuid.UUID(campaign_id),
            )
            per_contact = await conn.fetch(
                "SELECT contact_id, count(*) AS calls FROM calls WHERE campaign_id = $1 "
                "GROUP BY contact_id",
                uuid.UUID(campaign_id),
            )
            states = dict(
                await conn.fetch(
                    "SELECT state, count(*) FROM campaign_recipients WHERE campaign_id = $1 "
                    "GROUP BY state",
                    uuid.UUID(campaign_id),
                )
            )
            # Where a call's time goes: created -> placed (the calls queue), placed -> its end
            # recorded (ring time, then the next look), and an end -> the next call created
            # (the dispatcher woken): each call's creation after the latest end before it.
            stages = await conn.fetchrow(
                """
                WITH c AS (SELECT created_at, started_at, ended_at FROM calls
                           WHERE campaign_id = $1)
                SELECT avg(extract(epoch FROM started_at - created_at)) AS placing,
                       avg(extract(epoch FROM ended_at - started_at)) AS ringing,
                       (SELECT avg(extract(epoch FROM n.created_at - e.last))
                        FROM c AS n CROSS JOIN LATERAL (
                            SELECT max(ended_at) AS last FROM c WHERE ended_at <= n.created_at
                        ) AS e WHERE e.last IS NOT NULL) AS waking
                FROM c
                """,
                uuid.UUID(campaign_id),
            )
            span = await conn.fetchrow(
                "SELECT min(created_at) AS first, max(ended_at) AS last FROM calls "
                "WHERE campaign_id = $1",
                uuid.UUID(campaign_id),
            )
    finally:
        await pool.close()
    return {
        "timing": timing,
        "per_contact": per_contact,
        "states": states,
        "span": span,
        "stages": stages,
    }


def main() -> None:
    load = os.getloadavg()[0]
    reports = Path(tempfile.mkdtemp(prefix="switchboard-bench-"))
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)
        sub_account_id, schema, key = asyncio.run(prepare(url))
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000",
            "SWITCHBOARD_SANDBOX_RING_SECONDS": str(RING_SECONDS),
        }
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.campaigns",
                    "call-worker",
                    str(reports / f"{n}.json"),
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for n in range(WORKERS)
        ]
        try:
            with (
                serve(env, port),
                httpx.Client(
                    base_url=f"http://127.0.0.1:{port}",
                    headers={"x-api-key": key},
                    timeout=30,
                ) as client,
            ):
                time.sleep(5)  # the worker's due-work listener is up
                organisation = asyncio.run(_organisation(url, sub_account_id))
                campaign_id = set_up_campaign(client, sub_account_id, organisation)
                cpu_before = [psutil.Process(w.pid).cpu_times() for w in workers]
                start = time.time() + 3
                response = client.post(
                    f"/webhooks/inbound/campaigns/{campaign_id}/schedule",
                    json={"start_date": _iso(start)},
                )
                assert response.status_code == 200, response.text
                sampler = Sampler(url, schema, campaign_id)
                sampler.thread.start()
                deadline = time.monotonic() + 900
                while True:
                    campaign = client.get(f"/webhooks/inbound/campaigns/{campaign_id}").json()[
                        "campaign"
                    ]
                    if campaign["status"] in ("completed", "paused", "failed", "cancelled"):
                        break
                    assert time.monotonic() < deadline, campaign
                    time.sleep(0.5)
                cpu_after = [psutil.Process(w.pid).cpu_times() for w in workers]
                sampler.stop.set()
                sampler.thread.join(10)
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(60)
        result = asyncio.run(proof(url, schema, campaign_id))
    meters = [json.loads(path.read_text()) for path in sorted(reports.glob("*.json"))]
    meter = (
        {"cpu": sum(m["cpu"] for m in meters), "runs": sum(m["runs"] for m in meters)}
        if len(meters) == WORKERS
        else {"cpu": None, "runs": None}
    )
    worker_cpu = sum(
        (after.user + after.system) - (before.user + before.system)
        for before, after in zip(cpu_before, cpu_after, strict=True)
    )
    write_report(campaign, result, sampler.samples, meter, worker_cpu, load)


async def _organisation(url: str, sub_account_id: uuid.UUID) -> str:
    pool = await create_pool(url, min_size=1, max_size=1)
    try:
        return str(
            await pool.fetchval(
                "SELECT organisation_id FROM control.sub_accounts WHERE id = $1", sub_account_id
            )
        )
    finally:
        await pool.close()


def _command() -> str:
    poll = f"BENCH_WORKER_POLL_DELAY={POLL_DELAY:g} " if POLL_DELAY is not None else ""
    workers = f"BENCH_CALL_WORKERS={WORKERS} " if WORKERS != 1 else ""
    return f"{poll}{workers}python -m bench.campaigns call"


def _iso(moment: float) -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment % 1 * 1000):03d}Z"
    )


def write_report(
    campaign: dict[str, Any],
    result: dict[str, Any],
    samples: list[int],
    meter: dict[str, Any],
    worker_cpu: float,
    load: float,
) -> None:
    timing, span, stages = result["timing"], result["span"], result["stages"]
    seconds = (timing["completed_at"] - timing["started_at"]).total_seconds()
    ideal = RECIPIENTS / AT_ONCE * RING_SECONDS
    calls = sum(row["calls"] for row in result["per_contact"])
    once = len(result["per_contact"]) == RECIPIENTS and all(
        row["calls"] == 1 for row in result["per_contact"]
    )
    within = seconds <= ideal * TARGET_RATIO
    peak = max(samples, default=0)
    dispatcher = (
        f"{meter['cpu'] / calls * 1000:.2f} ms ({meter['cpu']:.1f} s in {meter['runs']} runs)"
        if meter["cpu"] is not None and calls
        else "not reported"
    )
    body = (
        f"Command: `{_command()}` ({RECIPIENTS} contacts whose sandbox numbers "
        f"never answer (`...0186`), `SWITCHBOARD_SANDBOX_RING_SECONDS={RING_SECONDS:g}`, one call "
        f"campaign from a smart list with max_concurrent_calls {AT_ONCE} on a plan of 100 calls at "
        "once, created and scheduled 3 s ahead over HTTP with `switchboard serve`, dispatched by "
        f"{'one worker' if WORKERS == 1 else f'{WORKERS} worker processes'} (cli.wiring's, its "
        "call campaign handler metered). Machine: "
        f"{os.cpu_count()} cores, 1-minute load average {load:.1f} at the start.\n\n"
        "| measure | value |\n|---|---|\n"
        f"| started_at to completed | {seconds:.1f} s |\n"
        f"| ideal: {RECIPIENTS} / {AT_ONCE} x {RING_SECONDS:g} s | {ideal:.1f} s |\n"
        f"| ratio (target at most {TARGET_RATIO}) | {seconds / ideal:.2f} |\n"
        f"| first call created to last call ended | "
        f"{(span['last'] - span['first']).total_seconds():.1f} s |\n"
        f"| calls on the line, sampled every 50 ms: peak / samples | {peak} / {len(samples)} |\n"
        f"| calls / recipients called / recipients | {calls} / {len(result['per_contact'])} / "
        f"{RECIPIENTS} |\n"
        f"| recipient states | {dict(sorted(result['states'].items()))} |\n"
        f"| a call's stages, mean: created to placed / placed to end recorded / an end to the "
        f"next call created | {stages['placing']:.2f} s / {stages['ringing']:.2f} s / "
        f"{stages['waking']:.2f} s |\n"
        f"| dispatcher CPU per call | {dispatcher} |\n"
        f"| the workers' whole CPU per call (dispatch, placing and following calls, queue) | "
        f"{worker_cpu / max(calls, 1) * 1000:.2f} ms ({worker_cpu:.1f} s) |\n\n"
        f"Campaign {campaign['status']}; exactly one call per recipient: "
        f"{'yes' if once else 'NO'}; limit of {AT_ONCE} never exceeded: "
        f"{'yes' if peak <= AT_ONCE else 'NO'}; within {TARGET_RATIO}x of the ideal: "
        f"{'met' if within else 'NOT met'}.\n"
    )
    title = "Call campaigns"
    if WORKERS != 1:
        title += f": {WORKERS} worker processes"
    if POLL_DELAY is not None:
        title += f": the worker polling every {POLL_DELAY:g} s"
    write_section(title, body)
    print(body)
