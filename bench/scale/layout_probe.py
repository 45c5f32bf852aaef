"""The same API load on sub-accounts whose rows are in tables of their own and on sub-accounts
whose rows are behind views over tenant_data, side by side in one run; where the difference goes.

`python -m bench.scale.layout_probe --data-dir DIR` on the database `python -m bench.scale`
built (at the head). Two groups of BENCH_LAYOUT_TENANTS (10) of its prepared sub-accounts: one
is taken back to t0017 (down through t0018: tables of its own, as before issue 28), the other
keeps its views. Both are reset to their seeded state, the API is served, and bench.scale's
request mix runs over one group, then the other, in alternating slices (ABBA), for
BENCH_SCALE_ROUNDS rounds: each group's PostgreSQL and API CPU time per request. With
pg_stat_statements loaded (shared_preload_libraries), each slice's statements are read and
reset, so every statement's time (planning and execution) and calls per request are known per
group. At the end the first group is migrated back to the head.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections import Counter
from typing import Any

import asyncpg
from aiosmtpd.controller import Controller
from alembic import command

from bench.common import percentile, serve
from bench.scale.__main__ import (
    RATE,
    ROUNDS,
    SECONDS,
    SLICE_SECONDS,
    SPREAD,
    Run,
    Sink,
    build,
    measure,
    open_loop,
    place,
    reset_accounts,
    server_env,
    server_settings,
)
from tenancy.db import schema_name_for
from tenancy.embedded import free_port
from tenancy.migrate import migrate_tenants
from tenancy.schema import alembic_config
from tenancy.settings import get_settings

TENANTS = int(os.environ.get("BENCH_LAYOUT_TENANTS", "10"))
BEFORE = "t0017"
WARMUP_SECONDS = 10.0
STATEMENTS = """
SELECT query, sum(calls) AS calls, sum(total_plan_time) AS plan_ms, sum(total_exec_time) AS exec_ms
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY query
"""


def to_tables(url: str, accounts: list[dict[str, Any]]) -> None:
    """Each of `accounts` down to t0017: its rows back in tables of its own."""
    for account in accounts:
        config = alembic_config("tenant", url)
        config.attributes["schema"] = schema_name_for(uuid.UUID(account["id"]))
        command.downgrade(config, BEFORE)

    async def record() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                "UPDATE control.sub_accounts SET schema_version = $1 WHERE id = ANY($2::uuid[])",
                BEFORE,
                [a["id"] for a in accounts],
            )
        finally:
            await conn.close()

    asyncio.run(record())


async def statements_available(url: str, *, keep: bool) -> bool:
    """With pg_stat_statements loaded: its view and planning times while `keep`, and neither
    afterwards (the database is bench.scale's, which counts its relations)."""
    conn = await asyncpg.connect(url)
    try:
        loaded = "pg_stat_statements" in await conn.fetchval("SHOW shared_preload_libraries")
        if loaded and keep:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
        elif loaded:
            await conn.execute("DROP EXTENSION IF EXISTS pg_stat_statements")
            await conn.execute("ALTER SYSTEM RESET pg_stat_statements.track_planning")
        await conn.execute("SELECT pg_reload_conf()")
        return bool(loaded)
    finally:
        await conn.close()


async def drive(
    port: int, url: str, groups: dict[str, list[dict[str, Any]]], api_pid: int, statements: bool
) -> tuple[list[Run], dict[str, dict[str, Counter[str]]]]:
    monitor = await asyncpg.connect(url)
    per_group: dict[str, dict[str, Counter[str]]] = {
        label: {"calls": Counter(), "ms": Counter(), "plan_ms": Counter()} for label in groups
    }
    try:
        for label, chosen in groups.items():
            await open_loop(port, chosen, WARMUP_SECONDS, 0, Run(label, len(chosen)))
        runs = []
        slices = max(1, round(SECONDS / SLICE_SECONDS))
        for n in range(ROUNDS):
            round_runs = {label: Run(label, len(chosen)) for label, chosen in groups.items()}
            order = list(groups.items())
            for k in range(slices):
                for label, chosen in order if k % 2 == 0 else order[::-1]:
                    if statements:
                        await monitor.execute("SELECT pg_stat_statements_reset()")
                    seed = 1000 + 100 * n + k
                    await measure(
                        port, url, chosen, SECONDS / slices, seed, round_runs[label], api_pid
                    )
                    if statements:
                        for row in await monitor.fetch(STATEMENTS):
                            found = per_group[label]
                            found["calls"][row["query"]] += row["calls"]
                            found["ms"][row["query"]] += row["plan_ms"] + row["exec_ms"]
                            found["plan_ms"][row["query"]] += row["plan_ms"]
            for label in groups:
                run = round_runs[label]
                done = max(1, len(run.latencies))
                run.api_cpu_ms, run.pg_cpu_ms = (
                    run.api_cpu_s * 1000 / done,
                    run.pg_cpu_s * 1000 / done,
                )
                runs.append(run)
                print(
                    f"  round {n + 1} {label}: {run.rate:.0f} req/s, p50 "
                    f"{percentile(run.latencies, 50):.1f} p99 "
                    f"{percentile(run.latencies, 99):.1f} ms, CPU ms/request API "
                    f"{run.api_cpu_ms:.2f} PostgreSQL {run.pg_cpu_ms:.2f}, "
                    f"statuses {dict(run.statuses)}, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        return runs, per_group
    finally:
        await monitor.close()


def statement_lines(
    per_group: dict[str, dict[str, Counter[str]]], requests: dict[str, int], top: int = 12
) -> list[str]:
    """The statements whose time per request differs most between the groups."""
    (a, b) = list(per_group)
    texts = set(per_group[a]["ms"]) | set(per_group[b]["ms"])

    def per_request(label: str, kind: str, text: str) -> float:
        return per_group[label][kind][text] / max(1, requests[label])

    ranked = sorted(
        texts, key=lambda t: abs(per_request(b, "ms", t) - per_request(a, "ms", t)), reverse=True
    )
    lines = [f"statement time per request, {a} -> {b} (ms; planning in brackets; calls):"]
    for text in ranked[:top]:
        lines.append(
            f"  {per_request(a, 'ms', text):.3f} ({per_request(a, 'plan_ms', text):.3f}) -> "
            f"{per_request(b, 'ms', text):.3f} ({per_request(b, 'plan_ms', text):.3f}); "
            f"{per_request(a, 'calls', text):.2f} -> {per_request(b, 'calls', text):.2f}: "
            f"{' '.join(text.split())[:150]}"
        )
    for label in (a, b):
        total = sum(per_group[label]["ms"].values()) / max(1, requests[label])
        plan = sum(per_group[label]["plan_ms"].values()) / max(1, requests[label])
        lines.append(f"  all statements, {label}: {total:.3f} ms per request, {plan:.3f} planning")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale.layout_probe")
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_SCALE_DATA_DIR"))
    args = parser.parse_args()
    started = time.perf_counter()
    sink = Sink()
    smtp = Controller(sink, hostname="127.0.0.1", port=free_port())
    smtp.start()
    try:
        with place(args.data_dir) as where:
            accounts = asyncio.run(build(where.url))["accounts"]
            tables, views = accounts[:TENANTS], accounts[SPREAD : SPREAD + TENANTS]
            groups = {"own tables (t0017)": tables, "views over tenant_data": views}
            to_tables(where.url, tables)
            try:
                print(f"reset: {asyncio.run(reset_accounts(where.url, tables + views))}")
                asyncio.run(server_settings(where.url))
                statements = asyncio.run(statements_available(where.url, keep=True))
                env = server_env(where, smtp.port)
                port = free_port()
                with serve(env, port) as api:
                    runs, per_group = asyncio.run(
                        drive(port, where.url, groups, api.pid, statements)
                    )
            finally:
                asyncio.run(statements_available(where.url, keep=False))
                get_settings.cache_clear()
                report = migrate_tenants(
                    where.url, concurrency=2, only=[uuid.UUID(t["id"]) for t in tables]
                )
                print(f"back at the head: {len(report.migrated)} migrated, {report.failed or ''}")
    finally:
        smtp.stop()
    for label in groups:
        mine = [r for r in runs if r.label == label]
        cpu = sorted(r.pg_cpu_ms for r in mine)
        api_cpu = sorted(r.api_cpu_ms for r in mine)
        print(
            f"{label}: PostgreSQL CPU ms/request by round {', '.join(f'{c:.2f}' for c in cpu)}; "
            f"API {', '.join(f'{c:.2f}' for c in api_cpu)}"
        )
    if statements:
        requests = {
            label: sum(len(r.latencies) for r in runs if r.label == label) for label in groups
        }
        print("\n".join(statement_lines(per_group, requests)))
    print(
        f"({time.perf_counter() - started:.0f} s at {RATE:g} req/s; load {os.getloadavg()[0]:.1f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
