"""Calendars under load (issue 26, point 7).

1. Free slots over 31 days of a calendar holding 2,000 booked appointments: GET
   /calendars/{id}/free-slots through `switchboard serve`, one request at a time on a keep-alive
   connection, against the same computation called directly in this process
   (`api.calendars.service.list_free_slots` on an asyncpg pool of its own: the same queries and
   arithmetic, no HTTP, key check, rate limiter or JSON). BENCH_CALENDARS_REQUESTS (200) on each
   side after 20 warm-ups, alternating in blocks of 20 so drift in machine load hits both.
   Targets: API p50 under 20 ms, and API p50 within 1.3x of the direct p50.
2. 50 clients booking one slot at once (POST /appointments, each on its own connection, sent
   together), BENCH_CALENDARS_ROUNDS (5) times on different slots. Target: every round exactly
   one 201, every other answer 409 slot_unavailable, no 5xx.

The calendar: America/New_York, 08:00-20:00 every day, 15-minute slots, no notice, a year ahead;
its 2,000 appointments fill two of every three slots of the next 63 days, so the 31 days asked
for hold about 1,000 of them and about 500 free slots.
Run: `python -m bench.calendars`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import uuid
from datetime import date, datetime, time, timedelta
from pathlib import Path
from time import perf_counter
from typing import Any
from zoneinfo import ZoneInfo

from api.calendars import service, slots
from bench.common import bench_servers, summary, write_section
from bench.contacts.__main__ import AUTH_CACHE, PREFIX, Connection, new_sub_account, server
from tenancy.clock import utcnow
from tenancy.db import create_pool, tenant_transaction
from tenancy.embedded import free_port
from tenancy.migrate import upgrade_control
from tenancy.schema import sub_account_of
from tenancy.scope import TenantScope
from tenancy.tables.shared import SHARED_SCHEMA

APPOINTMENTS = 2000
DAYS_SEEDED = 63
RANGE_DAYS = 31
REQUESTS = int(os.environ.get("BENCH_CALENDARS_REQUESTS", "200"))
CLIENTS = int(os.environ.get("BENCH_CALENDARS_CLIENTS", "50"))
ROUNDS = int(os.environ.get("BENCH_CALENDARS_ROUNDS", "5"))
BLOCK = 20
WARM_UP = 20
TARGET_MS = 20.0
TARGET_RATIO = 1.3
ZONE = "America/New_York"
CALENDAR = {
    "name": "Bench clinic",
    "timezone": ZONE,
    "slot_minutes": 15,
    "buffer_minutes": 0,
    "min_notice_minutes": 0,
    "max_days_ahead": 365,
    "availability": [
        {"day": day, "start": "08:00", "end": "20:00"}
        for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
    ],
}


async def _post(connection: Connection, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = await connection.request("POST", path, json.dumps(body).encode())
    assert status == 201, (path, status, answer[:300])
    return json.loads(answer)  # type: ignore[no-any-return]


def seed_rows(calendar: dict[str, Any], contact_id: uuid.UUID) -> list[tuple[Any, ...]]:
    """Two of every three slots of the next DAYS_SEEDED days, the first APPOINTMENTS of them."""
    rules = service.rules_of({**calendar, "id": uuid.UUID(calendar["id"])})
    first = utcnow().astimezone(rules.zone).date() + timedelta(days=1)
    grid = slots.candidates(rules, first, first + timedelta(days=DAYS_SEEDED - 1), utcnow())
    taken = [slot for index, slot in enumerate(grid) if index % 3 != 2][:APPOINTMENTS]
    assert len(taken) == APPOINTMENTS, len(taken)
    return [(uuid.UUID(calendar["id"]), contact_id, slot.start, slot.end) for slot in taken]


async def prepare(url: str, port: int) -> dict[str, Any]:
    """The key, the calendar (with its appointments), CLIENTS contacts and the tenant schema."""
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        key, schema = await new_sub_account(pool, "Calendars")
        connection = Connection(port, key)
        try:
            calendar = (await _post(connection, f"{PREFIX}/calendars", CALENDAR))["calendar"]
            contacts = [
                (
                    await _post(
                        connection,
                        f"{PREFIX}/contacts",
                        {"email": f"client-{n}@bench.example", "first_name": "Client"},
                    )
                )["contact_id"]
                for n in range(CLIENTS)
            ]
        finally:
            connection.close()
        # The rows go straight into the shared table (COPY cannot write through the tenant's
        # view), under the sub-account the view would give them.
        async with tenant_transaction(pool, schema) as conn:
            await conn.copy_records_to_table(
                "appointments",
                schema_name=SHARED_SCHEMA,
                columns=["sub_account_id", "calendar_id", "contact_id", "start", "end"],
                records=[
                    (sub_account_of(schema), *row)
                    for row in seed_rows(calendar, uuid.UUID(contacts[0]))
                ],
            )
            await conn.execute(f"ANALYZE {SHARED_SCHEMA}.appointments")
    finally:
        await pool.close()
    return {"key": key, "schema": schema, "calendar": calendar, "contacts": contacts}


# --- free slots -------------------------------------------------------------------------------


def days() -> tuple[date, date]:
    first = utcnow().astimezone(ZoneInfo(ZONE)).date() + timedelta(days=1)
    return first, first + timedelta(days=RANGE_DAYS - 1)


async def timed_api(connection: Connection, path: str, count: int) -> tuple[list[float], int]:
    timings, found = [], 0
    for _ in range(count):
        started = perf_counter()
        status, answer = await connection.request("GET", path)
        timings.append((perf_counter() - started) * 1000)
        assert status == 200, answer[:300]
        found = len(json.loads(answer)["slots"])
    return timings, found


async def timed_direct(
    scope: TenantScope, calendar_id: uuid.UUID, count: int
) -> tuple[list[float], int]:
    timings, found = [], 0
    first, last = days()
    for _ in range(count):
        started = perf_counter()
        body = await service.list_free_slots(scope, calendar_id, first, last)
        timings.append((perf_counter() - started) * 1000)
        found = len(body["slots"])
    return timings, found


async def free_slot_latency(url: str, port: int, seeded: dict[str, Any]) -> dict[str, Any]:
    pool = await create_pool(url, min_size=1, max_size=2)
    calendar_id = uuid.UUID(seeded["calendar"]["id"])
    scope = TenantScope(pool, uuid.uuid4(), seeded["schema"])
    connection = Connection(port, seeded["key"])
    first, last = days()
    path = (
        f"{PREFIX}/calendars/{calendar_id}/free-slots?from={first.isoformat()}"
        f"&to={last.isoformat()}"
    )
    results: dict[str, Any] = {"api": [], "direct": []}
    try:
        await timed_api(connection, path, WARM_UP)
        await timed_direct(scope, calendar_id, WARM_UP)
        for block in range(REQUESTS // BLOCK):
            sides = [
                ("api", lambda: timed_api(connection, path, BLOCK)),
                ("direct", lambda: timed_direct(scope, calendar_id, BLOCK)),
            ]
            for name, run in sides if block % 2 == 0 else sides[::-1]:
                timings, results[f"{name}_slots"] = await run()
                results[name] += timings
        zone = ZoneInfo(ZONE)
        async with tenant_transaction(pool, seeded["schema"]) as conn:
            results["booked_in_range"] = await conn.fetchval(
                "SELECT count(*) FROM appointments WHERE start >= $1 AND start < $2",
                datetime.combine(first, time(), tzinfo=zone),
                datetime.combine(last + timedelta(days=1), time(), tzinfo=zone),
            )
    finally:
        connection.close()
        await pool.close()
    return results


# --- one slot, many clients -------------------------------------------------------------------


async def one_slot_round(port: int, seeded: dict[str, Any], start: str) -> list[tuple[int, str]]:
    """CLIENTS connections, opened first, then all posting the same slot at once."""
    connections = [Connection(port, seeded["key"]) for _ in range(CLIENTS)]
    try:
        for connection in connections:  # connect (and warm) each before the burst
            status, _ = await connection.request("GET", f"{PREFIX}/calendars?limit=1")
            assert status == 200

        async def post(connection: Connection, contact_id: str) -> tuple[int, str]:
            body = {
                "calendar_id": seeded["calendar"]["id"],
                "contact_id": contact_id,
                "start": start,
            }
            status, answer = await connection.request(
                "POST", f"{PREFIX}/appointments", json.dumps(body).encode()
            )
            code = json.loads(answer)["error"]["code"] if status >= 400 else ""
            return status, code

        return await asyncio.gather(
            *(
                post(connection, contact_id)
                for connection, contact_id in zip(connections, seeded["contacts"], strict=True)
            )
        )
    finally:
        for connection in connections:
            connection.close()


async def one_slot(url: str, port: int, seeded: dict[str, Any]) -> list[dict[str, Any]]:
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        async with tenant_transaction(pool, seeded["schema"]) as conn:
            first = days()[0] + timedelta(days=DAYS_SEEDED + 1)
            _, found = await service.free_slots(
                conn, uuid.UUID(seeded["calendar"]["id"]), first, first + timedelta(days=1)
            )
    finally:
        await pool.close()
    rounds = []
    for number in range(ROUNDS):
        start = found[number * 7].start.isoformat()
        answers = await one_slot_round(port, seeded, start)
        statuses = [status for status, _ in answers]
        rounds.append(
            {
                "start": start,
                "created": statuses.count(201),
                "slot_unavailable": sum(
                    1 for status, code in answers if status == 409 and code == "slot_unavailable"
                ),
                "server_errors": sum(1 for status in statuses if status >= 500),
                "other": sorted({status for status in statuses if status not in (201, 409)}),
            }
        )
    return rounds


# --- the run ----------------------------------------------------------------------------------


def report(latency: dict[str, Any], rounds: list[dict[str, Any]], load: float) -> str:
    api, direct = summary(latency["api"]), summary(latency["direct"])
    ratio = api["p50"] / direct["p50"]
    clean = all(
        entry["created"] == 1
        and entry["slot_unavailable"] == CLIENTS - 1
        and not entry["server_errors"]
        for entry in rounds
    )
    lines = [
        f"Command: `python -m bench.calendars` (one calendar, {ZONE}, 08:00-20:00 every day, "
        f"15-minute slots, holding {APPOINTMENTS} booked appointments over the next "
        f"{DAYS_SEEDED} days, {latency['booked_in_range']} of them in the {RANGE_DAYS} days "
        f"asked for; one `switchboard serve` process, SWITCHBOARD_AUTH_CACHE_SECONDS="
        f"{AUTH_CACHE}; a 2-core machine that also runs PostgreSQL, Redis and the client, "
        "shared with other work, so read the ratio).",
        "",
        f"Free slots over {RANGE_DAYS} days ({latency['api_slots']} slots in the answer), one "
        f"request at a time, {len(latency['api'])} per side after {WARM_UP} warm-ups, "
        f"alternating in blocks of {BLOCK}. Direct: `api.calendars.service.list_free_slots` "
        "in the bench process on its own pool (the same two queries and the same arithmetic; no "
        "HTTP, key check, rate limiter or JSON).",
        "",
        "| side | p50 ms | p95 ms | p99 ms | mean ms |",
        "|---|---|---|---|---|",
        f"| API (GET /calendars/{{id}}/free-slots) | {api['p50']:.1f} | {api['p95']:.1f} | "
        f"{api['p99']:.1f} | {api['mean']:.1f} |",
        f"| direct | {direct['p50']:.1f} | {direct['p95']:.1f} | {direct['p99']:.1f} | "
        f"{direct['mean']:.1f} |",
        "",
        f"{CLIENTS} clients booking one slot at once (POST /appointments, each on its own "
        f"keep-alive connection, opened beforehand), {ROUNDS} rounds on different slots:",
        "",
        "| round | 201 | 409 slot_unavailable | 5xx | other statuses |",
        "|---|---|---|---|---|",
        *[
            f"| {n + 1} | {entry['created']} | {entry['slot_unavailable']} | "
            f"{entry['server_errors']} | {entry['other'] or '-'} |"
            for n, entry in enumerate(rounds)
        ],
        "",
        f"Targets: API p50 under {TARGET_MS:g} ms: "
        f"{'met' if api['p50'] < TARGET_MS else 'NOT met'} ({api['p50']:.1f} ms); API within "
        f"{TARGET_RATIO}x of direct: {'met' if ratio <= TARGET_RATIO else 'NOT met'} "
        f"({ratio:.2f}x); one booking per slot, every other answer 409, no 5xx: "
        f"{'met' if clean else 'NOT met'}.",
        "",
        f"Run {utcnow():%Y-%m-%d %H:%M} UTC, 1-minute load average {load:.1f} at the start. "
        "Of the direct time, about half is laying out the 1,488 candidate slots (one zone "
        "conversion each), a third writing the 496 answered ones as text, the rest the two "
        "queries (the booked appointments come from the exclusion constraint's gist index).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    load = os.getloadavg()[0]
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "100000000",
            "SWITCHBOARD_AUTH_CACHE_SECONDS": AUTH_CACHE,
        }
        logs = Path(tempfile.mkdtemp(prefix="switchboard-bench-calendars-"))
        port = free_port()
        try:
            with server(["cli", "serve", "--port", str(port)], env, port, logs / "serve.log"):
                seeded = asyncio.run(prepare(url, port))
                print("free slots, one request at a time", file=sys.stderr)
                latency = asyncio.run(free_slot_latency(url, port, seeded))
                print(f"{CLIENTS} clients, one slot", file=sys.stderr)
                rounds = asyncio.run(one_slot(url, port, seeded))
        finally:
            shutil.rmtree(logs, ignore_errors=True)
    body = report(latency, rounds, load)
    write_section("Calendars", body)
    print(body)


if __name__ == "__main__":
    main()
