"""Contact search at scale: GET /contacts with each filter over 100,000 contacts of one
sub-account, one request at a time, the service against the baseline (bench/contacts/baseline.py,
the same SQL on bare asyncpg, made by the service's own `search_conditions`/`search_statements`).

Seed: names from 40 first and 40 last names, emails `first.last.n@<one of 8 domains>`, phones
+1 NPA NXX XXXX all distinct, tags from 60 names (0 to 5 each), created one second apart.
Per filter: 20 warm-up requests, then BENCH_SEARCH_REQUESTS (200) on each side, alternating in
blocks of 20 so drift in machine load hits both. Target: every filter's service p50 under 25 ms.
Run: `python -m bench.contacts.search` (BENCH_SEARCH_CONTACTS to change the 100,000).
Also prints EXPLAIN (ANALYZE) of each filter's page and count statements (docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from api.contacts.service import (
    plan_settings,
    search_conditions,
    search_statements,
    valid_phone,
)
from bench.common import bench_servers, summary, write_section
from bench.contacts.__main__ import AUTH_CACHE, PREFIX, Connection, new_sub_account, server
from tenancy.db import create_pool, tenant_transaction
from tenancy.embedded import free_port
from tenancy.migrate import upgrade_control

CONTACTS = int(os.environ.get("BENCH_SEARCH_CONTACTS", "100000"))
REQUESTS = int(os.environ.get("BENCH_SEARCH_REQUESTS", "200"))
BLOCK = 20
WARM_UP = 20
TARGET_MS = 25.0

FIRST = (
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Frances",
    "John",
    "Margaret",
    "Ken",
    "Dennis",
    "Radia",
    "Tim",
    "Vint",
    "Sophie",
    "Linus",
    "Guido",
    "Bjarne",
    "Anita",
    "Leslie",
    "Shafi",
    "Niklaus",
    "Hedy",
    "Katherine",
    "Dorothy",
    "Claude",
    "Alonzo",
    "Kurt",
    "Emmy",
    "Sofia",
    "Lise",
    "Rosalind",
    "Marie",
    "Jean",
    "Evelyn",
    "Mary",
    "Ida",
    "Carl",
    "Annie",
    "Joan",
)
LAST = (
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Allen",
    "McCarthy",
    "Hamilton",
    "Thompson",
    "Ritchie",
    "Perlman",
    "Berners",
    "Cerf",
    "Wilson",
    "Torvalds",
    "Rossum",
    "Stroustrup",
    "Borg",
    "Lamport",
    "Goldwasser",
    "Wirth",
    "Lamarr",
    "Johnson",
    "Vaughan",
    "Shannon",
    "Church",
    "Goedel",
    "Noether",
    "Kovalevskaya",
    "Meitner",
    "Franklin",
    "Curie",
    "Bartik",
    "Boyd",
    "Jackson",
    "Rhodes",
    "Sagan",
    "Easley",
    "Clarke",
)
DOMAINS = (
    "mail.example",
    "post.example",
    "inbox.example",
    "corp.example",
    "uni.example",
    "lab.example",
    "co.example",
    "net.example",
)

SEED = """
INSERT INTO contacts (name, first_name, last_name, email, phone, tags, created_at)
SELECT f.first || ' ' || l.last, f.first, l.last,
       lower(f.first || '.' || l.last || '.' || n || '@' || d.domain),
       '+1' || (201 + n % 700)::text || (200 + (n / 700) % 800)::text
           || lpad(((n * 7919) % 10000)::text, 4, '0'),
       ARRAY(SELECT 'tag' || ((n * 7 + k * 13) % 60) FROM generate_series(1, n % 6) AS k),
       now() - (n || ' seconds')::interval
FROM generate_series(1, $1) AS n
CROSS JOIN LATERAL (SELECT ($2::text[])[1 + n % 40] AS first) AS f
CROSS JOIN LATERAL (SELECT ($3::text[])[1 + (n / 40) % 40] AS last) AS l
CROSS JOIN LATERAL (SELECT ($4::text[])[1 + (n / 1600) % 8] AS domain) AS d
ON CONFLICT DO NOTHING
"""


def filters(sample: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(label, query pairs) of every measured search (BENCH_SEARCH_ONLY: those whose label
    contains it); `sample` is one seeded contact."""
    only = os.environ.get("BENCH_SEARCH_ONLY", "")
    return [(label, pairs) for label, pairs in _filters(sample) if only in label]


def _filters(sample: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    return [
        ("no filter (the list)", []),
        ("q, a name part (3+ chars)", [("q", "ovela")]),
        ("q, 2 characters, common", [("q", "an")]),
        ("q, 2 characters, rare", [("q", "zz")]),
        ("q, an email part", [("q", "noether.1")]),
        ("q, phone digits", [("q", "(415) 2")]),
        ("q, rare (no match)", [("q", "nobody-here")]),
        ("email, exact", [("email", sample["email"].upper())]),
        ("phone, exact", [("phone", sample["phone"])]),
        ("tag, one", [("tag", "tag7")]),
        ("tag, two", [("tag", "tag7"), ("tag", "tag20")]),
        ("q + tag", [("q", "hopper"), ("tag", "tag7")]),
    ]


async def prepare(url: str) -> tuple[str, str, dict[str, Any]]:
    """(sub-account key, its schema, one seeded contact)."""
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        key, schema = await new_sub_account(pool, "Search")
        started = time.perf_counter()
        async with tenant_transaction(pool, schema) as conn:
            await conn.execute(SEED, CONTACTS, list(FIRST), list(LAST), list(DOMAINS))
        async with tenant_transaction(pool, schema) as conn:
            await conn.execute("ANALYZE contacts")
            rows = await conn.fetch(
                "SELECT email, phone FROM contacts ORDER BY created_at LIMIT 100 OFFSET 777"
            )
        sample = next(dict(row) for row in rows if valid_phone(row["phone"]))
        print(
            f"seeded {CONTACTS} contacts in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
    finally:
        await pool.close()
    return key, schema, sample


async def timed(connection: Connection, path: str, count: int) -> tuple[list[float], int]:
    timings, total = [], 0
    for _ in range(count):
        started = time.perf_counter()
        try:
            status, answer = await connection.request("GET", path)
        except (asyncio.IncompleteReadError, ConnectionError):
            # Idle past the server's keep-alive timeout (5 s) while the other side had its
            # turn: the server closed it. Connect again and time the request from there.
            connection.close()
            connection.reader = connection.writer = None
            started = time.perf_counter()
            status, answer = await connection.request("GET", path)
        timings.append((time.perf_counter() - started) * 1000)
        assert status == 200, (path, status, answer[:300])
        total = json.loads(answer)["total"]
    return timings, total


async def measure(ports: dict[str, int], key: str, sample: dict[str, Any]) -> list[dict[str, Any]]:
    results = []
    for label, pairs in filters(sample):
        path = f"{PREFIX}/contacts?{urlencode([*pairs, ('limit', '50')])}"
        print(f"search: {label}", file=sys.stderr)
        entry: dict[str, Any] = {"label": label, "query": urlencode(pairs) or "-"}
        # New connections per filter: hypercorn closes one after 1,000 requests.
        connections = {name: Connection(port, key) for name, port in ports.items()}
        try:
            for name, connection in connections.items():
                await timed(connection, path, WARM_UP)
                entry[name] = []
            for block in range(REQUESTS // BLOCK):
                order = list(connections.items())
                for name, connection in order if block % 2 == 0 else order[::-1]:
                    timings, entry["total"] = await timed(connection, path, BLOCK)
                    entry[name] += timings
        finally:
            for connection in connections.values():
                connection.close()
        results.append(entry)
    return results


async def explain(url: str, schema: str, sample: dict[str, Any]) -> str:
    """The plan of each filter's page and count statements (EXPLAIN ANALYZE, short)."""
    pool = await create_pool(url, min_size=1, max_size=1)
    out = []
    try:
        for label, pairs in filters(sample):
            params: dict[str, list[str]] = {}
            for name, value in pairs:
                params.setdefault(name, []).append(value)
            first = {name: values[0] for name, values in params.items()}
            conditions = search_conditions(
                first.get("q"), first.get("email"), first.get("phone"), params.get("tag")
            )
            page, count, values = search_statements(conditions)
            out.append(f"-- {label}: {urlencode(pairs) or '-'}")
            async with tenant_transaction(pool, schema) as conn:
                settings = plan_settings(conditions)
                if settings:
                    await conn.execute(settings)
                for statement, args in ((page, [*values, 50, 0]), (count, values)):
                    rows = await conn.fetch(
                        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + statement, *args
                    )
                    out += ["   " + row[0] for row in rows]
    finally:
        await pool.close()
    return "\n".join(out)


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        f"Command: `python -m bench.contacts.search` (one sub-account with {CONTACTS:,} contacts; "
        f"one request at a time, limit=50, {REQUESTS} requests per filter and side after "
        f"{WARM_UP} warm-ups, alternating in blocks of {BLOCK}). One `switchboard serve` process "
        "against one process of `bench/contacts/baseline.py` (the same SQL, made by the "
        "service's own search functions, on bare asyncpg), "
        f"SWITCHBOARD_AUTH_CACHE_SECONDS={AUTH_CACHE} for both; a 2-core machine that also "
        "runs PostgreSQL, Redis and the load generator (and, during this run, other engineers' "
        "test suites), so the ratios are what to compare across runs.",
        "",
        "| filter | query | matches | service p50 / p95 ms | baseline p50 / p95 ms "
        "| p50 ratio service / baseline |",
        "|---|---|---|---|---|---|",
    ]
    missed = []
    for entry in results:
        service, base = summary(entry["service"]), summary(entry["baseline"])
        if service["p50"] >= TARGET_MS:
            missed.append(entry["label"])
        lines.append(
            f"| {entry['label']} | `{entry['query']}` | {entry['total']:,} | "
            f"{service['p50']:.1f} / {service['p95']:.1f} | "
            f"{base['p50']:.1f} / {base['p95']:.1f} | "
            f"{service['p50'] / base['p50']:.2f} |"
        )
    lines += [
        "",
        f"Target: every filter's service p50 under {TARGET_MS:g} ms: "
        + (f"NOT met by {', '.join(missed)}." if missed else "met."),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)
        key, schema, sample = asyncio.run(prepare(url))
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "100000000",
            "SWITCHBOARD_AUTH_CACHE_SECONDS": AUTH_CACHE,
        }
        logs = Path(tempfile.mkdtemp(prefix="switchboard-bench-search-"))
        try:
            with ExitStack() as stack:
                ports = {"service": free_port(), "baseline": free_port()}
                stack.enter_context(
                    server(
                        ["cli", "serve", "--port", str(ports["service"])],
                        env,
                        ports["service"],
                        logs / "service.log",
                    )
                )
                stack.enter_context(
                    server(
                        ["bench.contacts.baseline", str(ports["baseline"])],
                        env,
                        ports["baseline"],
                        logs / "baseline.log",
                    )
                )
                results = asyncio.run(measure(ports, key, sample))
            plans = asyncio.run(explain(url, schema, sample))
        except BaseException:
            print(f"server logs kept in {logs}", file=sys.stderr)
            raise
        shutil.rmtree(logs, ignore_errors=True)
    body = report(results)
    write_section("Contact search", body)
    print(body)
    print(plans)


if __name__ == "__main__":
    main()
