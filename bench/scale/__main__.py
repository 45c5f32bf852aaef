"""Scale: 10,000 sub-accounts in one PostgreSQL, a mixed load over 1,000 of them against 10.

1. Build BENCH_SCALE_TENANTS sub-accounts (default 10,000) through the product's provisioning
   code (`provision_sub_account`: control row, schema at head from the metadata DDL, wallet,
   owner invitation, invitation email to a local SMTP sink), BENCH_SCALE_BUILD_CONCURRENCY
   (default 4) at a time. Provisioning locks its organisation row, so the sub-accounts are spread
   over that many organisations to let the builds run side by side. Then 1,010 of them, drawn at
   random, get a sub-account key and 20 contacts (two thirds with tags).
2. Measure the database: its size on disk, pg_class rows, relations per tenant, catalog sizes;
   probe one new connection's catalog cache over 500 schemas (time of a first and a second touch,
   memory per schema); and take the lock a whole-database pg_dump takes on every tenant table.
3. `switchboard migrate` as a whole process, three times (a no-op: every schema is at head).
4. A mixed load (reads, list, create, patch, tag add, note add, tag summary) against
   `switchboard serve`, open loop at a fixed offered rate (BENCH_SCALE_RATE req/s, default 100)
   with at most BENCH_SCALE_CONNECTIONS (32) keep-alive connections; latency counts from the
   request's scheduled time, so queueing is included. The load spread over 1,000 sub-accounts
   (each request picks one at random and uses its key) and the same load over 10 sub-accounts
   take turns in slices of BENCH_SCALE_SLICE_SECONDS (5), BENCH_SCALE_ROUNDS (4) rounds of
   BENCH_SCALE_SECONDS (30) of each, after a warm-up of each (BENCH_SCALE_WARMUP_PASSES, 10,
   passes over its sub-accounts). Per round: latency percentiles and the CPU
   time per request of the API process and of its PostgreSQL backends (steadier than latency on
   a shared machine). Any answer other than 200/201 fails the run.
5. Provisioning at 10,000: BENCH_SCALE_PROVISION_COUNT (100) create-subaccount-webhook requests
   over HTTP, one at a time after 10 warm-up ones, as bench/provisioning.py does; the sub-accounts
   they create are dropped again afterwards so a kept database stays at its size.

6. Issue 28: relations per tenant schema by kind (TOAST included); stall evidence for the rounds
   (requests over BENCH_SCALE_STALL_MS with the server's wait events sampled around them, the
   API's /healthz lag and the checkpoint, lock-wait and autovacuum lines of the server's log);
   a rolling bench-only migration (a column with a default and an index on contacts) over every
   schema while the mixed load runs (BENCH_SCALE_ROLL=0 skips it), taken out again afterwards;
   and a memory sweep: BENCH_SCALE_SWEEP_SECONDS (300) of load walking every sub-account in
   turn against a fresh `switchboard serve` per tenant budget in BENCH_SCALE_SWEEP_BUDGETS
   ("0,default,500": off, the product default, 500), the summed private memory of the server's
   backends sampled every few seconds.

`--build-only` builds (or finishes building) and stops. The build takes a while, so the
database can be kept and reused:
- `python -m bench.scale --data-dir DIR`: an embedded PostgreSQL cluster kept in DIR (started
  again on the next run; only the measurements run when the build is complete there);
- `BENCH_SCALE_DATABASE_URL=postgresql://.../sbscale python -m bench.scale`: that database on any
  server (created if missing, never dropped).
Without either, a throwaway database (DATABASE_URL / REDIS_URL when set, else embedded) is used.
Redis is embedded unless REDIS_URL is set. An interrupted build resumes where it stopped.
Each run on a kept database appends its headline numbers to a history kept in that database
(table public.bench_scale_state), printed under the results.
The "Scale: ..." section of bench/RESULTS.md is written when at least 10,000 sub-accounts are
measured (or BENCH_SCALE_WRITE=1); smaller runs only print.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import psutil
from aiosmtpd.controller import Controller

from bench.common import (
    bench_servers,
    bench_settings,
    percentile,
    serve,
    summary,
    write_section,
)
from tenancy.db import create_pool, schema_name_for, tenant_transaction
from tenancy.embedded import free_port, start_postgres, start_redis
from tenancy.migrate import upgrade_control
from tenancy.organisations import create_organisation
from tenancy.principals import insert_key
from tenancy.provisioning import NewSubAccount, provision_sub_account
from tenancy.schema import delete_shared_rows, replace_view_sql, tenant_columns
from tenancy.settings import get_settings

TENANTS = int(os.environ.get("BENCH_SCALE_TENANTS", "10000"))
SPREAD = int(os.environ.get("BENCH_SCALE_LOAD_TENANTS", "1000"))
FEW = int(os.environ.get("BENCH_SCALE_FEW_TENANTS", "10"))
CONTACTS = int(os.environ.get("BENCH_SCALE_CONTACTS", "20"))
BUILD_CONCURRENCY = int(os.environ.get("BENCH_SCALE_BUILD_CONCURRENCY", "4"))
RATE = float(os.environ.get("BENCH_SCALE_RATE", "100"))
SECONDS = float(os.environ.get("BENCH_SCALE_SECONDS", "30"))
ROUNDS = int(os.environ.get("BENCH_SCALE_ROUNDS", "4"))
# Within a round the two loads take turns in slices of this length.
SLICE_SECONDS = float(os.environ.get("BENCH_SCALE_SLICE_SECONDS", "5"))
WARMUP_SECONDS = float(os.environ.get("BENCH_SCALE_WARMUP_SECONDS", "5"))
# The embedded server's shared buffers (with --data-dir): a quarter of this machine's memory
# or less, as a production server would be sized; 1,000 active sub-accounts' pages and
# catalog rows do not fit the 256 MB default.
SHARED_BUFFERS = os.environ.get("BENCH_SCALE_SHARED_BUFFERS", "2GB")
# The warm-up of each set lasts at least this many passes over its sub-accounts, so the API's
# pooled PostgreSQL connections have met their schemas before the rounds (the steady state of a
# running service); the cold first passes are reported on their own.
WARMUP_PASSES = float(os.environ.get("BENCH_SCALE_WARMUP_PASSES", "10"))
CONNECTIONS = int(os.environ.get("BENCH_SCALE_CONNECTIONS", "32"))
PROVISION_COUNT = int(os.environ.get("BENCH_SCALE_PROVISION_COUNT", "100"))
# The memory sweep: a load that walks over every sub-account in turn, for this long, once with
# the connections' tenant budget off and once on (SWITCHBOARD_DB_CONNECTION_MAX_TENANTS).
SWEEP_SECONDS = float(os.environ.get("BENCH_SCALE_SWEEP_SECONDS", "300"))
# The tenant budgets the sweep runs with, one server each: 0 (off, the unbounded before) and
# the product's default first, then any others to compare.
SWEEP_BUDGETS = [
    int(b)
    for b in os.environ.get("BENCH_SCALE_SWEEP_BUDGETS", "0,default,500")
    .replace("default", str(get_settings().db_connection_max_tenants))
    .split(",")
]
SWEEP_MIX = {"list": 50, "tags": 20, "create": 30}  # what works on a sub-account without data
MEMORY_SAMPLE_SECONDS = 5.0
# The rolling migration under load: migration processes (the load keeps the rest of the CPU).
ROLL_CONCURRENCY = int(os.environ.get("BENCH_SCALE_ROLL_CONCURRENCY", "2"))
ROLL = os.environ.get("BENCH_SCALE_ROLL", "1") == "1"
# A request slower than this is a stall, looked up in the server's log and wait samples.
STALL_MS = float(os.environ.get("BENCH_SCALE_STALL_MS", "100"))
TARGET_RELATIONS = 50
# The memory budget of one server backend (a pooled connection) serving at most `budget`
# tenants, stated before measuring: a fresh backend plus a catalog cache per tenant schema.
BACKEND_BASE_MIB = 20.0
BACKEND_KIB_PER_TENANT = 150.0


def backend_budget_mib(budget: int) -> float:
    return BACKEND_BASE_MIB + budget * BACKEND_KIB_PER_TENANT / 1024


TARGET_CPU_RATIO = 1.2
MIGRATE_RUNS = 3
DATABASE_NAME = "sbscale"
PREFIX = "/webhooks/inbound"
TIMEOUT = 30.0
TAGS = [f"tag{n}" for n in range(10)]
# Operation weights: reads dominate, as in real traffic.
MIX = {"read": 30, "list": 15, "update": 15, "tag_add": 12, "create": 12, "note": 10, "tags": 6}
TARGET_P99_RATIO = 1.5
TARGET_MIGRATE_SECONDS = 30.0
TARGET_PROVISION_P50_MS = 100.0

STATE_DDL = (
    "CREATE TABLE IF NOT EXISTS public.bench_scale_state (name text PRIMARY KEY, value jsonb)"
)

SEED = """
INSERT INTO contacts (name, first_name, last_name, email, phone, tags)
SELECT 'Person ' || n, 'Person', n::text, 'person' || n || '@scale.example',
       '+1415' || (2000000 + n)::text,
       ARRAY(SELECT 'tag' || ((n * 7 + k * 3) % 10) FROM generate_series(1, n % 3) AS k)
FROM generate_series(1, $1) AS n
RETURNING id
"""


class Sink:
    def __init__(self) -> None:
        self.count = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.count += 1
        return "250 OK"


# --- servers and the kept database ----------------------------------------------------------


@dataclass
class Place:
    url: str
    redis_url: str
    kept: bool
    how: str  # the command that reuses it, or a note that it is thrown away


async def _ensure_database(url: str) -> None:
    server, name = url.rsplit("/", 1)
    name = name.split("?", 1)[0]
    conn = await asyncpg.connect(f"{server}/postgres")
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


@contextmanager
def place(data_dir: str | None) -> Iterator[Place]:
    with ExitStack() as stack:
        redis_url = os.environ.get("REDIS_URL")
        if not redis_url:
            cache = start_redis(
                Path(tempfile.mkdtemp(prefix="switchboard-scale-redis-")), port=free_port()
            )
            stack.callback(cache.stop)
            redis_url = cache.url
        kept_url = os.environ.get("BENCH_SCALE_DATABASE_URL")
        if kept_url:
            bench_settings(Path(os.environ.get("SWITCHBOARD_DATA_DIR", ".data")))
            asyncio.run(_ensure_database(kept_url))
            yield Place(
                kept_url,
                redis_url,
                True,
                f"BENCH_SCALE_DATABASE_URL={kept_url} python -m bench.scale",
            )
        elif data_dir:
            bench_settings(Path(data_dir))  # kept with the database: its keys keep working
            pg = start_postgres(Path(data_dir), shared_buffers=SHARED_BUFFERS)
            if pg.started_here:
                stack.callback(pg.stop)
            url = pg.url.rsplit("/", 1)[0] + f"/{DATABASE_NAME}"
            asyncio.run(_ensure_database(url))
            yield Place(
                url, redis_url, True, f"python -m bench.scale --data-dir {Path(data_dir).resolve()}"
            )
        else:
            os.environ["REDIS_URL"] = redis_url  # bench_servers must not start a second one
            with bench_servers() as (url, redis, _):
                yield Place(url, redis, False, "throwaway database (dropped at the end)")


def server_env(where: Place, smtp_port: int) -> dict[str, str]:
    """The environment of the API server under load: this database, Redis and mail sink, no
    rate limit."""
    return {
        **os.environ,
        "DATABASE_URL": where.url,
        "REDIS_URL": where.redis_url,
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(smtp_port),
        "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000",
        "SWITCHBOARD_LOG_FORMAT": "text",
    }


async def load_state(conn: asyncpg.Connection) -> dict[str, Any]:
    await conn.execute(STATE_DDL)
    rows = await conn.fetch("SELECT name, value::text AS value FROM public.bench_scale_state")
    return {row["name"]: json.loads(row["value"]) for row in rows}


async def save_state(conn: asyncpg.Connection, name: str, value: Any) -> None:
    await conn.execute(
        "INSERT INTO public.bench_scale_state (name, value) VALUES ($1, $2::text::jsonb) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        name,
        json.dumps(value),
    )


# --- 1. build -------------------------------------------------------------------------------


async def build(url: str) -> dict[str, Any]:
    """Provision sub-accounts until the bench organisations hold TENANTS; returns build facts."""
    pool = await create_pool(url, min_size=2, max_size=BUILD_CONCURRENCY + 2)
    try:
        async with pool.acquire() as conn:
            state = await load_state(conn)
        organisations = state.get("organisations")
        if organisations is None:
            organisations = []
            for n in range(BUILD_CONCURRENCY):
                oid, key = await create_organisation(
                    pool, f"Scale Agency {n}", "white_label", 1_000_000
                )
                organisations.append({"id": str(oid), "key": key})
            async with pool.acquire() as conn:
                await save_state(conn, "organisations", organisations)
        org_ids = [uuid.UUID(o["id"]) for o in organisations]
        existing = await pool.fetchval(
            "SELECT count(*) FROM control.sub_accounts WHERE organisation_id = ANY($1)", org_ids
        )
        build_facts: dict[str, Any] = state.get("build", {})
        todo = TENANTS - existing
        if todo > 0:
            print(
                f"building {todo} sub-accounts ({existing} exist), {len(org_ids)} at a time",
                flush=True,
            )
            timings: list[float] = [0.0] * todo
            counter = iter(range(todo))
            started = time.perf_counter()

            async def worker(organisation_id: uuid.UUID) -> None:
                for i in counter:
                    n = existing + i
                    began = time.perf_counter()
                    await provision_sub_account(
                        pool,
                        organisation_id,
                        NewSubAccount(f"owner{n}@scale.example", f"Scale {n}", None, None),
                    )
                    timings[i] = (time.perf_counter() - began) * 1000
                    if (n + 1) % 500 == 0:
                        recent = [t for t in timings[max(0, i - 499) : i + 1] if t]
                        print(
                            f"  {n + 1} sub-accounts, {time.perf_counter() - started:.0f} s, "
                            f"last 500 p50 {percentile(recent, 50):.0f} ms",
                            flush=True,
                        )

            await asyncio.gather(*(worker(oid) for oid in org_ids))
            seconds = time.perf_counter() - started
            chunk = max(1, min(1000, todo // 10))
            build_facts = {
                "seconds": seconds + build_facts.get("seconds", 0.0),
                "created": todo + build_facts.get("created", 0),
                "resumed": existing > 0 or build_facts.get("resumed", False),
                "concurrency": len(org_ids),
                "p50_first_ms": build_facts.get("p50_first_ms", percentile(timings[:chunk], 50)),
                "p50_last_ms": percentile(timings[-chunk:], 50),
                "chunk": chunk,
                "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "loadavg": os.getloadavg()[0],
            }
            async with pool.acquire() as conn:
                await save_state(conn, "build", build_facts)
        accounts = state.get("accounts")
        if accounts is None:
            accounts = await prepare_accounts(pool, org_ids)
            async with pool.acquire() as conn:
                await save_state(conn, "accounts", accounts)
        return {"build": build_facts, "accounts": accounts, "organisations": organisations}
    finally:
        await pool.close()


async def prepare_accounts(pool: asyncpg.Pool, org_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """SPREAD + FEW sub-accounts drawn at random: a key and CONTACTS seeded contacts each."""
    rows = await pool.fetch(
        "SELECT id, organisation_id, schema_name FROM control.sub_accounts "
        "WHERE organisation_id = ANY($1) ORDER BY id",
        org_ids,
    )
    chosen = random.Random(7).sample(list(rows), SPREAD + FEW)
    accounts = []
    for row in chosen:
        async with pool.acquire() as conn:
            _, key = await insert_key(conn, "sub_account", row["organisation_id"], row["id"])
        async with tenant_transaction(pool, row["schema_name"]) as conn:
            ids = [str(r["id"]) for r in await conn.fetch(SEED, CONTACTS)]
        accounts.append({"id": str(row["id"]), "key": key, "contacts": ids})
    print(
        f"prepared {len(accounts)} sub-accounts with keys and {CONTACTS} contacts each", flush=True
    )
    return accounts


RESET_NOTES = "DELETE FROM notes"
RESET_CONTACTS = "DELETE FROM contacts WHERE email NOT LIKE 'person%@scale.example'"
# The seeded contacts as SEED wrote them (the load renames them and adds tags).
RESET_SEEDED = """
UPDATE contacts AS c
SET first_name = 'Person',
    tags = ARRAY(SELECT 'tag' || ((s.n * 7 + k * 3) % 10) FROM generate_series(1, s.n % 3) AS k)
FROM (SELECT id, substring(email FROM '^person([0-9]+)@')::int AS n FROM contacts) AS s
WHERE c.id = s.id AND s.n IS NOT NULL
"""


async def reset_accounts(url: str, accounts: list[dict[str, Any]]) -> dict[str, int]:
    """Put the measured sub-accounts back to their seeded state: the same sub-accounts serve
    every run, and the writes of earlier runs would otherwise pile up on the 10 (a hundred
    times the load per sub-account of the 1,000), making their reads slower run after run."""
    removed = {"contacts": 0, "notes": 0}
    pool = await create_pool(url, min_size=1, max_size=4)
    try:
        for account in accounts:
            schema = schema_name_for(uuid.UUID(account["id"]))
            async with tenant_transaction(pool, schema) as conn:
                notes = int((await conn.execute(RESET_NOTES)).split()[-1])
                contacts = int((await conn.execute(RESET_CONTACTS)).split()[-1])
                await conn.execute(RESET_SEEDED)
            removed["notes"] += notes
            removed["contacts"] += contacts
            if (notes or contacts > 100) and await pool.fetchval(
                "SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace "
                "AND relname IN ('contacts', 'notes') AND relkind = 'r'",
                schema,
            ):
                await pool.execute(f"VACUUM ANALYZE {schema}.contacts, {schema}.notes")
        # Schemas of views (t0018 on): their rows were deleted from tenant_data's tables.
        if removed["notes"] or removed["contacts"] > 100:
            await pool.execute("VACUUM ANALYZE tenant_data.contacts, tenant_data.notes")
    finally:
        await pool.close()
    return removed


# --- 2. the database at this size -----------------------------------------------------------


async def database_facts(
    url: str, organisation_id: str, key_hash_sample: bytes | None
) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        facts: dict[str, Any] = {
            "size": await conn.fetchval("SELECT pg_database_size(current_database())"),
            "relations": await conn.fetchval("SELECT count(*) FROM pg_class"),
            "schemas": await conn.fetchval(
                "SELECT count(*) FROM pg_namespace WHERE nspname ~ '^t_[0-9a-f]{32}$'"
            ),
            "sub_accounts": await conn.fetchval("SELECT count(*) FROM control.sub_accounts"),
            "version": await conn.fetchval("SHOW server_version"),
            "shared_buffers": await conn.fetchval("SHOW shared_buffers"),
            "fsync": await conn.fetchval("SHOW fsync"),
        }
        one = await conn.fetchval(
            "SELECT schema_name FROM control.sub_accounts ORDER BY created_at LIMIT 1"
        )
        facts["per_tenant_relations"] = await conn.fetchval(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = $1",
            one,
        )
        facts["per_tenant_toast"] = 2 * await conn.fetchval(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = $1 AND c.reltoastrelid <> 0",
            one,
        )
        facts["relkinds"] = await relation_kinds(conn, one)
        facts["per_tenant_bytes_files"] = await conn.fetchval(
            "SELECT coalesce(sum(pg_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
            one,
        )
        facts["catalogs"] = {
            name: await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", name)
            for name in (
                "pg_class",
                "pg_attribute",
                "pg_depend",
                "pg_index",
                "pg_constraint",
                "pg_type",
            )
        }
        # The two control queries whose cost could grow with the number of sub-accounts.
        plan = await conn.fetch(
            "EXPLAIN (ANALYZE, BUFFERS) SELECT count(*) FROM control.sub_accounts "
            "WHERE organisation_id = $1",
            uuid.UUID(organisation_id),
        )
        facts["count_plan"] = [r[0] for r in plan]
        if key_hash_sample is not None:
            from tenancy.principals import SELECT_KEY

            plan = await conn.fetch("EXPLAIN (ANALYZE) " + SELECT_KEY, key_hash_sample)
            facts["key_plan"] = [r[0] for r in plan]
        return facts
    finally:
        await conn.close()


async def dump_lock_check(url: str) -> dict[str, Any]:
    """pg_dump takes an ACCESS SHARE lock on every table it dumps, all in one transaction: do the
    same for every tenant table and see whether the server's lock table holds them."""
    conn = await asyncpg.connect(url)
    try:
        facts: dict[str, Any] = {
            "tables": await conn.fetchval(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname ~ '^t_[0-9a-f]{32}$'"
            ),
            "max_locks": int(await conn.fetchval("SHOW max_locks_per_transaction")),
            "max_connections": int(await conn.fetchval("SHOW max_connections")),
        }
        try:
            await conn.execute("""
                DO $$ DECLARE r record; BEGIN
                  FOR r IN SELECT c.oid::regclass AS t FROM pg_class c
                           JOIN pg_namespace n ON n.oid = c.relnamespace
                           WHERE c.relkind = 'r' AND n.nspname ~ '^t_[0-9a-f]{32}$' LOOP
                    EXECUTE format('LOCK TABLE %s IN ACCESS SHARE MODE', r.t);
                  END LOOP;
                END $$""")
            facts["error"] = None
        except asyncpg.PostgresError as exc:
            facts["error"] = str(exc).splitlines()[0]
        return facts
    finally:
        await conn.close()


# --- 3. switchboard migrate -----------------------------------------------------------------


def migrate_runs(env: dict[str, str]) -> list[float]:
    timings = []
    for _ in range(MIGRATE_RUNS):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "cli", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        timings.append(time.perf_counter() - started)
        assert done.returncode == 0 and "all tenant schemas at head" in done.stderr, done.stderr
    return timings


# --- 4. load --------------------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection; just enough of the protocol for these answers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, method: str, path: str, key: str, body: bytes = b""
    ) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {key}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status, answer, close = await asyncio.wait_for(self._response(), TIMEOUT)
        if close:  # the server ends the connection (hypercorn: after 1,000 requests on it)
            self.close()
        return status, answer

    async def _response(self) -> tuple[int, bytes, bool]:
        assert self.reader is not None
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {
            n.strip().lower(): v.strip()
            for n, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        close = headers.get("connection", "").lower() == "close"
        if "content-length" in headers:
            return status, await self.reader.readexactly(int(headers["content-length"])), close
        chunks = b""
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return status, chunks, close
            chunks += chunk[:-2]

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def make_request(
    account: dict[str, Any], rng: random.Random, mix: dict[str, int] = MIX
) -> tuple[str, str, str, bytes]:
    """(operation, method, path, body) of one request of the mix for this sub-account."""
    operation = rng.choices(list(mix), weights=list(mix.values()))[0]
    contact = rng.choice(account["contacts"]) if account["contacts"] else None
    if operation == "read":
        return operation, "GET", f"{PREFIX}/contacts/{contact}", b""
    if operation == "list":
        return operation, "GET", f"{PREFIX}/contacts?limit=20", b""
    if operation == "tags":
        return operation, "GET", f"{PREFIX}/tags", b""
    if operation == "create":
        body: dict[str, Any] = {
            "email": f"c-{uuid.uuid4().hex[:16]}@scale.example",
            "first_name": "New",
        }
        return operation, "POST", f"{PREFIX}/contacts", json.dumps(body).encode()
    if operation == "update":
        body = {"first_name": f"N{rng.randrange(10**6)}"}
        return operation, "PATCH", f"{PREFIX}/contacts/{contact}", json.dumps(body).encode()
    if operation == "tag_add":
        body = {"tags": [rng.choice(TAGS)]}
        return operation, "POST", f"{PREFIX}/contacts/{contact}/tags", json.dumps(body).encode()
    body = {"content": f"note {uuid.uuid4().hex}"}
    return operation, "POST", f"{PREFIX}/contacts/{contact}/notes", json.dumps(body).encode()


@dataclass
class Run:
    label: str
    tenants: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    operations: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    waited: int = 0  # requests that found every connection busy at their scheduled time
    api_cpu_ms: float = 0.0  # CPU time of the API process per request
    pg_cpu_ms: float = 0.0  # CPU time of the server's PostgreSQL backends per request
    loadavg: float = 0.0  # 1-minute load average at the end of the run
    wal_kib: float = 0.0  # WAL written per request
    api_cpu_s: float = 0.0  # summed over the round's slices
    pg_cpu_s: float = 0.0
    wal_bytes: float = 0.0
    waits: Counter[str] = field(default_factory=Counter)  # sampled states of busy backends
    # (wall time, state) of every busy backend sampled waiting; requests over STALL_MS as
    # (wall time scheduled, latency ms, operation); (wall time, ms) of the API's /healthz.
    wait_log: list[tuple[float, str]] = field(default_factory=list)
    slow: list[tuple[float, float, str]] = field(default_factory=list)
    loop_lag: list[tuple[float, float]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0


async def open_loop(
    port: int,
    accounts: list[dict[str, Any]],
    seconds: float,
    seed: int,
    run: Run,
    *,
    mix: dict[str, int] = MIX,
    in_order: bool = False,
    until: asyncio.Event | None = None,
) -> None:
    """RATE requests per second on a fixed schedule, each on a free connection of CONNECTIONS;
    latency from the scheduled time (a request that waits for a connection counts its wait).
    `in_order` walks the accounts in turn instead of drawing them; with `until`, the load goes
    on past `seconds` until that event is set."""
    rng = random.Random(seed)
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    connections = [Connection(port) for _ in range(CONNECTIONS)]
    for connection in connections:
        idle.put_nowait(connection)
    count = int(RATE * seconds)
    start = time.perf_counter() + 0.05
    tasks = []

    async def one(
        scheduled: float, account: dict[str, Any], request: tuple[str, str, str, bytes]
    ) -> None:
        if idle.empty():
            run.waited += 1
        connection = await idle.get()
        operation, method, path, body = request
        try:
            status, answer = await connection.request(method, path, account["key"], body)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            connection.close()
            run.statuses[0] += 1
            run.problems.append(f"{operation}: {type(exc).__name__}")
            return
        finally:
            idle.put_nowait(connection)
        latency = (time.perf_counter() - scheduled) * 1000
        run.latencies.append(latency)
        if latency >= STALL_MS:
            run.slow.append((time.time() - latency / 1000, latency, operation))
        run.statuses[status] += 1
        run.operations[operation] += 1
        if status not in (200, 201) and len(run.problems) < 20:
            run.problems.append(f"{operation} {method} {path}: {status} {answer[:200]!r}")

    i = 0
    while i < count or (until is not None and not until.is_set()):
        scheduled = start + i / RATE
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        account = accounts[i % len(accounts)] if in_order else rng.choice(accounts)
        request = make_request(account, rng, mix)
        tasks.append(asyncio.create_task(one(scheduled, account, request)))
        i += 1
    await asyncio.gather(*tasks)
    run.seconds += max(time.perf_counter() - start, 1e-9)
    for connection in connections:
        connection.close()


def anonymous_mib(pid: int) -> float | None:
    """Private anonymous memory of a process (heap: its caches), without the shared buffers."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def sample_backends(url: str) -> dict[str, float] | None:
    """Private memory of the server's PostgreSQL backends when they are on this host: each
    backend caches the catalog entries of every relation it has touched, and never evicts them."""
    sizes = []
    for pid in await backend_pids(url):
        size = anonymous_mib(pid)
        if size is None:
            return None
        sizes.append(size)
    if not sizes:
        return None
    return {"backends": len(sizes), "max_mib": max(sizes), "sum_mib": sum(sizes)}


PROBE_QUERIES = [
    ("SELECT id, name, first_name, email, tags FROM contacts WHERE id = $1", True),
    (
        "SELECT id, email, count(*) OVER () AS total FROM contacts "
        "ORDER BY created_at DESC, id DESC LIMIT 20",
        False,
    ),
    ("SELECT id, content FROM notes WHERE contact_id = $1 ORDER BY created_at DESC LIMIT 5", True),
    ("SELECT balance FROM wallet WHERE id = 1", False),
]


async def probe_transaction(conn: asyncpg.Connection, schema: str) -> None:
    """The probe's four tenant queries in one transaction on `schema`."""
    async with conn.transaction():
        await conn.execute(f"SET LOCAL search_path TO {schema}, public")
        for query, with_id in PROBE_QUERIES:
            await conn.fetch(query, *([uuid.uuid4()] if with_id else []))


async def catalog_cache_probe(url: str, schemas: list[str]) -> dict[str, float]:
    """One new connection runs the same four tenant queries in each schema, twice: the first
    pass loads every relation's catalog entries into the backend's cache, the second finds them.
    Returns the cache growth per schema and the two passes' time per schema."""
    conn = await asyncpg.connect(url)
    size = "SELECT sum(total_bytes) FROM pg_backend_memory_contexts"
    try:
        before = await conn.fetchval(size)
        timings = []
        for _ in range(2):
            started = time.perf_counter()
            for schema in schemas:
                await probe_transaction(conn, schema)
            timings.append((time.perf_counter() - started) * 1000 / len(schemas))
        after = await conn.fetchval(size)
    finally:
        await conn.close()
    return {
        "schemas": len(schemas),
        "kib_per_schema": float(after - before) / 1024 / len(schemas),
        "cold_ms": timings[0],
        "warm_ms": timings[1],
    }


WARM_SETS = (10, 250, 1000, 2000)
WARM_TRANSACTIONS = 2000
WARM_ROUNDS = 5


async def warm_cost_probe(url: str) -> dict[int, dict[str, float]]:
    """What a transaction of the probe's four queries costs a backend that has every schema it
    serves cached already, by how many schemas it serves: one connection per set, warmed with
    two passes over it; then WARM_ROUNDS rounds, each timing WARM_TRANSACTIONS round-robin
    transactions on every connection in turn (so other work on the machine lands on all),
    by the backend's own CPU time; the median round. Tells whether fewer schemas per
    connection (tenant affinity) would cut the spread load's cost."""
    conns = {size: await asyncpg.connect(url) for size in WARM_SETS}
    try:
        first = conns[WARM_SETS[0]]
        schemas = [
            row[0]
            for row in await first.fetch(
                "SELECT schema_name FROM control.sub_accounts ORDER BY id LIMIT $1", max(WARM_SETS)
            )
        ]
        for size, conn in conns.items():
            for schema in schemas[:size] * 2:
                await probe_transaction(conn, schema)
        return await median_rounds(
            conns,
            lambda size, conn, n: probe_transaction(conn, schemas[n % size]),
            WARM_ROUNDS,
            WARM_TRANSACTIONS,
        )
    finally:
        for conn in conns.values():
            await conn.close()


Key = TypeVar("Key", bound=Hashable)


async def median_rounds(
    conns: dict[Key, asyncpg.Connection],
    transaction: Callable[[Key, asyncpg.Connection, int], Awaitable[None]],
    rounds: int,
    transactions: int,
) -> dict[Key, dict[str, float]]:
    """`rounds` rounds, each running `transaction` (key, connection, n) for n in
    range(`transactions`) on every connection in turn (so other work on the machine lands on
    all); per connection, the median round's backend CPU and wall milliseconds per
    transaction, and the backend's cache after."""
    backends = {
        key: psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))
        for key, conn in conns.items()
    }
    cpu: dict[Key, list[float]] = {key: [] for key in conns}
    wall: dict[Key, list[float]] = {key: [] for key in conns}
    for _ in range(rounds):
        for key, conn in conns.items():
            before, began = sum(backends[key].cpu_times()[:2]), time.perf_counter()
            for n in range(transactions):
                await transaction(key, conn, n)
            spent = sum(backends[key].cpu_times()[:2]) - before
            cpu[key].append(spent * 1000 / transactions)
            wall[key].append((time.perf_counter() - began) * 1000 / transactions)
    memory = "SELECT sum(total_bytes) FROM pg_backend_memory_contexts"
    return {
        key: {
            "cpu_ms": statistics.median(cpu[key]),
            "wall_ms": statistics.median(wall[key]),
            "cache_mib": float(await conn.fetchval(memory)) / 2**20,
        }
        for key, conn in conns.items()
    }


async def backend_pids(url: str) -> list[int]:
    conn = await asyncpg.connect(url)
    try:
        return [
            r[0]
            for r in await conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            )
        ]
    finally:
        await conn.close()


async def cpu_seconds(url: str, api_pid: int) -> tuple[float, dict[int, float]]:
    """CPU time (user + system) of the API process and of each of its PostgreSQL backends:
    what a request costs, which machine noise does not inflate the way it does wall time."""

    def cpu(pid: int) -> float | None:
        try:
            times = psutil.Process(pid).cpu_times()
        except (psutil.Error, OSError):
            return None
        return float(times.user + times.system)

    backends = {pid: value for pid in await backend_pids(url) if (value := cpu(pid)) is not None}
    return cpu(api_pid) or 0.0, backends


async def sample_waits(conn: asyncpg.Connection, run: Run, stop: asyncio.Event) -> None:
    """Every 0.2 s, what the server's busy backends are doing (running, or waiting on what)."""
    query = (
        "SELECT coalesce(wait_event_type || ':' || wait_event, 'running') FROM "
        "pg_stat_activity WHERE datname = current_database() AND state = 'active' "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    )
    while not stop.is_set():
        for row in await conn.fetch(query):
            run.waits[row[0]] += 1
            if row[0] != "running":
                run.wait_log.append((time.time(), row[0]))
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except TimeoutError:
            pass


async def probe_loop_lag(port: int, run: Run, stop: asyncio.Event) -> None:
    """GET /healthz (no database) every 0.1 s on a connection of its own: its latency is the
    API process's event loop being busy elsewhere (or the machine's scheduler)."""
    connection = Connection(port)
    try:
        while not stop.is_set():
            began = time.perf_counter()
            try:
                await connection.request("GET", "/healthz", "")
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                connection.close()
            run.loop_lag.append((time.time(), (time.perf_counter() - began) * 1000))
            try:
                await asyncio.wait_for(stop.wait(), 0.1)
            except TimeoutError:
                pass
    finally:
        connection.close()


# Settings a production server with many tenants runs with (docs/operations.md, "Scale"):
# writes spread over many sub-accounts touch many distinct pages, and the first change of a page
# after a checkpoint logs the whole page. Compressing those images and checkpointing less often
# keeps that WAL in proportion. Set for both loads alike; a checkpoint then starts the warm-up.
SERVER_SETTINGS = {"wal_compression": "on", "checkpoint_timeout": "15min", "max_wal_size": "4GB"}
# What the server logs during the load, to explain stalls: every checkpoint, every lock wait
# longer than deadlock_timeout (lowered from 1 s so shorter waits show), and autovacuum runs
# longer than 100 ms (of the catalog too).
LOG_SETTINGS = {
    "log_checkpoints": "on",
    "log_lock_waits": "on",
    "deadlock_timeout": "100ms",
    "log_autovacuum_min_duration": "100ms",
}


async def server_settings(url: str) -> dict[str, str]:
    conn = await asyncpg.connect(url)
    try:
        for name, value in {**SERVER_SETTINGS, **LOG_SETTINGS}.items():
            await conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        await conn.execute("SELECT pg_reload_conf()")
        await asyncio.sleep(1)
        await conn.execute("CHECKPOINT")
        return {name: await conn.fetchval(f"SHOW {name}") for name in SERVER_SETTINGS}
    finally:
        await conn.close()


async def measure(
    port: int,
    url: str,
    chosen: list[dict[str, Any]],
    seconds: float,
    seed: int,
    run: Run,
    api_pid: int,
) -> None:
    """One slice of load over `chosen`; its requests, CPU time, WAL and waits go into `run`."""
    api_before, pg_before = await cpu_seconds(url, api_pid)
    monitor = await asyncpg.connect(url)
    wal_before = await monitor.fetchval("SELECT pg_current_wal_lsn()::text")
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_waits(monitor, run, stop))
    lag = asyncio.create_task(probe_loop_lag(port, run, stop))
    await open_loop(port, chosen, seconds, seed, run)
    stop.set()
    await sampler
    await lag
    run.wal_bytes += float(
        await monitor.fetchval(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)", wal_before
        )
    )
    await monitor.close()
    api_after, pg_after = await cpu_seconds(url, api_pid)
    run.api_cpu_s += api_after - api_before
    run.pg_cpu_s += sum(value - pg_before.get(pid, 0.0) for pid, value in pg_after.items())


async def drive(
    port: int, url: str, accounts: list[dict[str, Any]], api_pid: int
) -> tuple[list[Run], dict[str, Any]]:
    spread, few = accounts[:SPREAD], accounts[SPREAD : SPREAD + FEW]
    sets = [(f"{FEW} sub-accounts", few), (f"{SPREAD} sub-accounts", spread)]
    memory: dict[str, Any] = {}
    for label, chosen in sets:  # warm-up: pools, caches, the first touch of each schema
        warmup = Run(label, len(chosen))
        seconds = max(WARMUP_SECONDS, WARMUP_PASSES * len(chosen) / RATE)
        await open_loop(port, chosen, seconds, 0, warmup)
        memory[f"warmup {label}"] = {"seconds": seconds, **summary(warmup.latencies)}
        print(
            f"  warm-up {label}: {seconds:.0f} s, p50 {percentile(warmup.latencies, 50):.1f} "
            f"p99 {percentile(warmup.latencies, 99):.1f} ms",
            flush=True,
        )
    runs = []
    slices = max(1, round(SECONDS / SLICE_SECONDS))
    for n in range(ROUNDS):
        # A round interleaves the two loads in slices (ABBA...), so a burst of other work on
        # this shared machine lands on both rather than on whichever happened to be running.
        round_runs = {label: Run(label, len(chosen)) for label, chosen in sets}
        for k in range(slices):
            for label, chosen in sets if k % 2 == 0 else sets[::-1]:
                await measure(
                    port,
                    url,
                    chosen,
                    SECONDS / slices,
                    1000 + 100 * n + k,
                    round_runs[label],
                    api_pid,
                )
        for label, _ in sets:
            run = round_runs[label]
            done = max(1, len(run.latencies))
            run.api_cpu_ms, run.pg_cpu_ms = run.api_cpu_s * 1000 / done, run.pg_cpu_s * 1000 / done
            run.wal_kib = run.wal_bytes / 1024 / done
            run.loadavg = os.getloadavg()[0]
            runs.append(run)
            print(
                f"  round {n + 1} {label}: {run.rate:.0f} req/s, p50 "
                f"{percentile(run.latencies, 50):.1f} p99 {percentile(run.latencies, 99):.1f} ms"
                f", CPU ms/request API {run.api_cpu_ms:.2f} PostgreSQL {run.pg_cpu_ms:.2f}, "
                f"WAL {run.wal_kib:.1f} KiB/request, max {max(run.latencies):.0f} ms, "
                f"{run.waited} waited for a connection, load {run.loadavg:.1f}, "
                f"statuses {dict(run.statuses)}, backends busy: "
                f"{dict(run.waits.most_common(4))}",
                flush=True,
            )
        sampled = await sample_backends(url)
        memory.update({label: sampled for label, _ in sets})
    return runs, memory


# --- relations per tenant, the memory sweep, the rolling migration, stalls ---------------------

RELKIND_NAMES = {"r": "tables", "i": "indexes", "S": "sequences", "v": "views", "p": "partitioned"}


async def relation_kinds(conn: asyncpg.Connection, schema: str) -> dict[str, int]:
    """pg_class rows one tenant schema brings: its own relations by kind, and the TOAST tables
    (and their indexes) of its tables, which live in pg_toast."""
    rows = await conn.fetch(
        "SELECT c.relkind::text AS kind, count(*) AS n FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 GROUP BY 1",
        schema,
    )
    kinds = {RELKIND_NAMES.get(r["kind"], r["kind"]): int(r["n"]) for r in rows}
    toast = await conn.fetchval(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.reltoastrelid <> 0",
        schema,
    )
    kinds["TOAST tables"] = kinds["TOAST indexes"] = int(toast)
    kinds["total"] = sum(kinds.values())
    return kinds


async def sweep_accounts(url: str) -> list[dict[str, Any]]:
    """A sub-account key for every bench sub-account (made once, kept in the state table)."""
    conn = await asyncpg.connect(url)
    try:
        state = await load_state(conn)
        if "sweep" in state and len(state["sweep"]) >= TENANTS:
            return list(state["sweep"])
        organisations = [uuid.UUID(o["id"]) for o in state["organisations"]]
        rows = await conn.fetch(
            "SELECT id, organisation_id FROM control.sub_accounts "
            "WHERE organisation_id = ANY($1) ORDER BY id",
            organisations,
        )
        accounts = []
        for row in rows:
            async with conn.transaction():
                _, key = await insert_key(conn, "sub_account", row["organisation_id"], row["id"])
            accounts.append({"id": str(row["id"]), "key": key, "contacts": []})
        await save_state(conn, "sweep", accounts)
        print(f"made sweep keys for {len(accounts)} sub-accounts", flush=True)
        return accounts
    finally:
        await conn.close()


async def memory_sweep(
    port: int,
    url: str,
    accounts: list[dict[str, Any]],
    label: str,
    data_dir: str | None,
    api_pid: int,
) -> dict[str, Any]:
    """SWEEP_SECONDS of load walking over every sub-account in turn (list, tag summary, create)
    while the private memory of the server's backends is sampled every few seconds."""
    order = accounts[:]
    random.Random(11).shuffle(order)
    run = Run(label, len(order))
    samples: list[dict[str, float]] = []
    stop = asyncio.Event()

    async def sample() -> None:
        began = time.perf_counter()
        while not stop.is_set():
            memory = await sample_backends(url)
            if memory is not None:
                samples.append({"t": time.perf_counter() - began, **memory})
            try:
                await asyncio.wait_for(stop.wait(), MEMORY_SAMPLE_SECONDS)
            except TimeoutError:
                pass

    began = time.time()
    api = psutil.Process(api_pid)
    api_cpu = sum(api.cpu_times()[:2])
    monitor = await asyncpg.connect(url)
    watchers = [
        asyncio.create_task(sample()),
        asyncio.create_task(sample_waits(monitor, run, stop)),
        asyncio.create_task(probe_loop_lag(port, run, stop)),
    ]
    await open_loop(port, order, SWEEP_SECONDS, 5, run, mix=SWEEP_MIX, in_order=True)
    stop.set()
    await asyncio.gather(*watchers)
    await monitor.close()
    stalls = stall_evidence([run], server_log_lines(data_dir, began, time.time()))
    touched = min(len(run.latencies), len(order))
    result: dict[str, Any] = {
        "requests": len(run.latencies),
        "passes": len(run.latencies) / len(order),
        "touched": touched,
        "errors": sum(c for st, c in run.statuses.items() if st not in (200, 201)),
        "problems": run.problems[:5],
        **summary(run.latencies),
        "samples": samples,
        "stalls": stalls,
        "loadavg": os.getloadavg()[0],
        # The API process's CPU over the sweep, as a share of one core.
        "api_cpu_share": (sum(api.cpu_times()[:2]) - api_cpu) / max(1e-9, time.time() - began),
    }
    if samples:
        result["peak_sum_mib"] = max(x["sum_mib"] for x in samples)
        result["peak_max_mib"] = max(x["max_mib"] for x in samples)
        result["end_sum_mib"] = samples[-1]["sum_mib"]
        result["peak_backends"] = max(x["backends"] for x in samples)
    print(
        f"  memory sweep, {label}: {result['requests']} requests ({result['passes']:.1f} passes "
        f"over {len(order)}), p99 {result['p99']:.1f} ms, errors {result['errors']}, backends "
        f"peak sum {result.get('peak_sum_mib', 0):.0f} MiB, largest "
        f"{result.get('peak_max_mib', 0):.0f} MiB",
        flush=True,
    )
    return result


def run_sweeps(
    env: dict[str, str], port: int, url: str, data_dir: str | None
) -> dict[str, dict[str, Any]]:
    """One memory sweep per tenant budget of SWEEP_BUDGETS, each against a fresh server."""
    everyone = asyncio.run(sweep_accounts(url))
    results = {}
    for budget in SWEEP_BUDGETS:
        label = f"budget {budget}" if budget else "recycling off"
        with serve({**env, "SWITCHBOARD_DB_CONNECTION_MAX_TENANTS": str(budget)}, port) as api:
            results[label] = asyncio.run(
                memory_sweep(port, url, everyone, label, data_dir, api.pid)
            )
    return results


ROLL_REVISION = "bench_roll"
# A column with a default and an index on contacts. The rows are in tenant_data (issue 28): the
# column and its index go onto the shared table once (ADD COLUMN with a constant default changes
# no row; the index is built CONCURRENTLY), both under the load, and the tenant migration rolled
# over every schema shows the column in the tenant's contacts view.
ROLL_COLUMN = (
    "ALTER TABLE tenant_data.contacts ADD COLUMN bench_score integer NOT NULL DEFAULT 0",
    "CREATE INDEX CONCURRENTLY ix_contacts_bench_score "
    "ON tenant_data.contacts (sub_account_id, bench_score)",
)
ROLL_MIGRATION = """\"\"\"bench only: contacts shows bench_score.

Revision ID: {rev}
Revises: {down}
\"\"\"

from alembic import op
from sqlalchemy import text

from tenancy.schema import replace_view_sql, sub_account_of, tenant_columns

revision = "{rev}"
down_revision = "{down}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_bind().execute(text("SELECT current_schema()")).scalar_one()
    columns = [*tenant_columns()["contacts"], "bench_score"]
    op.execute(replace_view_sql(sub_account_of(schema), "contacts", columns))


def downgrade() -> None:
    raise NotImplementedError
"""
ROLL_OUT = (
    "DROP INDEX IF EXISTS tenant_data.ix_contacts_bench_score; "
    "ALTER TABLE tenant_data.contacts DROP COLUMN IF EXISTS bench_score"
)


async def rolling_migration(
    port: int, url: str, accounts: list[dict[str, Any]], api_pid: int
) -> dict[str, Any]:
    """A bench-only tenant migration (a column with a default and an index on contacts) rolled
    over every tenant schema by `migrate_tenants` while the mixed load runs on SPREAD of them;
    then every schema is checked at its head, and the change is taken back out again."""
    import shutil

    from tenancy.migrate import migrate_tenants, tenants_behind
    from tenancy.schema import MIGRATIONS_DIR, head_revision

    head = head_revision("tenant")
    scripts = Path(tempfile.mkdtemp(prefix="switchboard-roll-")) / "tenant"
    shutil.copytree(MIGRATIONS_DIR / "tenant", scripts)
    (scripts / "versions" / f"bench_{ROLL_REVISION}.py").write_text(
        ROLL_MIGRATION.format(rev=ROLL_REVISION, down=head)
    )
    run = Run("rolling migration", SPREAD)
    done = asyncio.Event()
    shared_seconds: list[float] = []

    def migrate() -> Any:
        return migrate_tenants(url, concurrency=ROLL_CONCURRENCY, script_location=scripts)

    async def migrate_then_stop() -> Any:
        try:
            conn = await asyncpg.connect(url)
            try:
                for statement in ROLL_COLUMN:
                    began = time.perf_counter()
                    await conn.execute(statement)
                    shared_seconds.append(time.perf_counter() - began)
            finally:
                await conn.close()
            return await asyncio.to_thread(migrate)
        finally:
            done.set()

    started = time.perf_counter()
    migration = asyncio.create_task(migrate_then_stop())
    await open_loop(port, accounts[:SPREAD], 1.0, 21, run, until=done)
    report = await migration
    seconds = time.perf_counter() - started
    behind = tenants_behind(url, ROLL_REVISION)
    facts = {
        "tenants": report.total,
        "migrated": len(report.migrated),
        "failed": len(report.failed),
        "failures": list(report.failed.values())[:3],
        "behind": len(behind),
        "seconds": seconds,
        "requests": len(run.latencies),
        "statuses": dict(run.statuses),
        "errors_5xx": sum(c for st, c in run.statuses.items() if st >= 500 or st == 0),
        "other": sum(c for st, c in run.statuses.items() if st not in (200, 201)),
        "problems": run.problems[:5],
        "shared_column_seconds": shared_seconds,
        **summary(run.latencies),
    }
    print(f"  rolling migration: {facts}", flush=True)
    facts["undo_seconds"] = await undo_rolling_migration(url, head)
    shutil.rmtree(scripts.parent, ignore_errors=True)
    return facts


async def undo_rolling_migration(url: str, head: str) -> float:
    """Take the bench migration out of every schema again (the database stays at the product's
    head); a dropped column stays in pg_attribute as a dropped one, as after any DROP COLUMN."""
    started = time.perf_counter()
    pool = await create_pool(url, min_size=1, max_size=BUILD_CONCURRENCY)
    try:
        rows = await pool.fetch(
            "SELECT id, schema_name FROM control.sub_accounts WHERE schema_version = $1",
            ROLL_REVISION,
        )
        queue = iter(rows)

        async def worker() -> None:
            for row in queue:
                async with tenant_transaction(pool, row["schema_name"]) as conn:
                    await conn.execute(
                        replace_view_sql(row["id"], "contacts", tenant_columns()["contacts"])
                    )
                    await conn.execute("UPDATE alembic_version SET version_num = $1", head)
                    await conn.execute(
                        "UPDATE control.sub_accounts SET schema_version = $1 WHERE id = $2",
                        head,
                        row["id"],
                    )

        await asyncio.gather(*(worker() for _ in range(BUILD_CONCURRENCY)))
        await pool.execute(ROLL_OUT)
    finally:
        await pool.close()
    return time.perf_counter() - started


def server_log_lines(data_dir: str | None, since: float, until: float) -> list[str]:
    """The embedded server's log lines between two wall times that say something about stalls:
    checkpoints, lock waits, autovacuum, and anything at WARNING or worse."""
    if not data_dir:
        return []
    path = Path(data_dir) / "postgres" / "server.log"
    if not path.exists():
        return []
    wanted = ("checkpoint", "still waiting", "acquired", "automatic vacuum", "automatic analyze")
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
        except ValueError:
            continue
        if since <= stamp.timestamp() <= until and (
            any(w in line for w in wanted) or "WARNING" in line or "ERROR" in line
        ):
            lines.append(line)
    return lines


def stall_evidence(runs: list[Run], log_lines: list[str]) -> dict[str, Any]:
    """Each slow request with what was seen within a second of it: waits sampled on the
    server, the API's /healthz lag, and checkpoint / lock / autovacuum log lines."""
    waits = [w for r in runs for w in r.wait_log]
    lags = [x for r in runs for x in r.loop_lag]
    slow = sorted((s for r in runs for s in r.slow), key=lambda s: s[1], reverse=True)
    stamped = []
    for line in log_lines:
        try:
            logged_at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
            stamped.append((logged_at.timestamp(), line))
        except ValueError:
            continue
    details = []
    for when, latency, operation in slow[:15]:
        near = Counter(state for t, state in waits if when - 0.5 <= t <= when + latency / 1000)
        lag = max((ms for t, ms in lags if when - 0.5 <= t <= when + latency / 1000), default=0)
        logged = [line[24:120] for t, line in stamped if when - 1 <= t <= when + 1 + latency / 1000]
        details.append(
            {
                "at": datetime.fromtimestamp(when, UTC).strftime("%H:%M:%S.%f")[:-3],
                "ms": latency,
                "operation": operation,
                "waits": dict(near.most_common(3)),
                "healthz_ms": lag,
                "log": logged[:3],
            }
        )
    lag_values = [ms for _, ms in lags]
    return {
        "slow": len(slow),
        "requests": sum(len(r.latencies) for r in runs),
        "details": details,
        "healthz": summary(lag_values) if lag_values else None,
        "healthz_max": max(lag_values, default=0.0),
        "checkpoints": sum("checkpoint complete" in line for line in log_lines),
        "lock_waits": sum("still waiting" in line for line in log_lines),
        "autovacuum": sum("automatic" in line for line in log_lines),
        "log_sample": log_lines[:8],
    }


# --- 5. provisioning at this size ------------------------------------------------------------


def provision_over_http(port: int, agency_key: str) -> tuple[list[float], list[str]]:
    timings: list[float] = []
    created: list[str] = []
    tag = uuid.uuid4().hex[:6]
    with httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"x-api-key": agency_key}, timeout=30
    ) as client:
        for i in range(PROVISION_COUNT + 10):
            started = time.perf_counter()
            response = client.post(
                "/functions/v1/create-subaccount-webhook",
                json={"email": f"p{i}-{tag}@scale.example", "name": f"Probe {tag} {i}"},
            )
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status_code == 201, response.text
            created.append(response.json()["sub_account_id"])
            if i >= 10:  # the first requests warm connections and caches
                timings.append(elapsed)
    return timings, created


async def drop_sub_accounts(url: str, ids: list[str]) -> None:
    """Remove the probe sub-accounts again (schema, rows and control rows) so the size stays
    put."""
    conn = await asyncpg.connect(url)
    try:
        for sid in ids:
            async with conn.transaction():
                await conn.execute(
                    f'DROP SCHEMA IF EXISTS "{schema_name_for(uuid.UUID(sid))}" CASCADE'
                )
                await delete_shared_rows(conn, uuid.UUID(sid))
                await conn.execute("DELETE FROM control.sub_accounts WHERE id = $1", uuid.UUID(sid))
    finally:
        await conn.close()


# --- report ---------------------------------------------------------------------------------


def mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB" if value < 2**30 else f"{value / 2**30:,.2f} GiB"


def report(facts: dict[str, Any]) -> str:
    db, runs, build = facts["db"], facts["runs"], facts["build"]
    few_label, spread_label = f"{FEW} sub-accounts", f"{SPREAD} sub-accounts"
    pooled = {
        label: [x for r in runs if r.label == label for x in r.latencies]
        for label in (few_label, spread_label)
    }
    few, spread = summary(pooled[few_label]), summary(pooled[spread_label])
    ratio = spread["p99"] / few["p99"]
    facts["ratio"] = ratio
    migrate = facts["migrate"]
    prov = summary(facts["provision"])
    errors = sum(c for r in runs for s, c in r.statuses.items() if s not in (200, 201))
    n_tenants = db["sub_accounts"]
    per_tenant = db["size"] / max(1, n_tenants)

    def verdict(ok: bool, margin: float = 0.0) -> str:
        if not ok:
            return "**NOT met**"
        return "met, at the limit (see below)" if margin > 0.9 else "met"

    lines = [
        f"Command: `python -m bench.scale` ({n_tenants:,} sub-accounts in one database; "
        f"reuse the built database with `--data-dir DIR` or `BENCH_SCALE_DATABASE_URL`, see the "
        "module docstring). Machine: "
        f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, PostgreSQL {db['version']} "
        f"(shared_buffers {db['shared_buffers']}, fsync {db['fsync']}), shared with other work: "
        f"1-minute load average {facts['load_start']:.1f} at the start, "
        f"{facts['load_before_load']:.1f} before the load rounds, {facts['load_end']:.1f} at the "
        "end.",
        "",
        "| measure | measured | target | verdict |",
        "|---|---|---|---|",
        f"| p99 latency, mixed load over {SPREAD:,} sub-accounts / over {FEW} | "
        f"{spread['p99']:.1f} / {few['p99']:.1f} ms = **{ratio:.2f}x** | within "
        f"{TARGET_P99_RATIO}x | {verdict(ratio <= TARGET_P99_RATIO, ratio / TARGET_P99_RATIO)} |",
        f"| `switchboard migrate` no-op over {db['schemas']:,} schemas, whole process "
        f"({MIGRATE_RUNS} runs) | {', '.join(f'{t:.2f}' for t in migrate)} s | under "
        f"{TARGET_MIGRATE_SECONDS:.0f} s | {verdict(max(migrate) < TARGET_MIGRATE_SECONDS)} |",
        f"| provisioning over HTTP at {n_tenants:,} ({len(facts['provision'])} sequential "
        f"create-subaccount-webhook) | p50 **{prov['p50']:.1f} ms** (p95 {prov['p95']:.1f}, "
        f"p99 {prov['p99']:.1f}) | p50 under {TARGET_PROVISION_P50_MS:.0f} ms | "
        f"{verdict(prov['p50'] < TARGET_PROVISION_P50_MS)} |",
        *issue28_rows(facts, runs, verdict),
        "",
        "Load: open loop at a fixed offered rate of "
        f"{RATE:.0f} req/s for both (the same schedule length, at most {CONNECTIONS} keep-alive "
        "connections, latency measured from each request's scheduled time so waiting for a "
        "connection counts), against one `switchboard serve` process (hypercorn) with the rate "
        "limit raised to 1,000,000 per window for both, and the default key cache (a resolved "
        "key trusted 60 s while the API process is told of suspensions, tenancy.principals). "
        "Mix: "
        + ", ".join(f"{k} {v}%" for k, v in MIX.items())
        + " (read = GET /contacts/{id}, list = GET /contacts?limit=20, update = PATCH, tag_add = "
        "POST /contacts/{id}/tags, note = POST /contacts/{id}/notes, tags = GET /tags). "
        "PostgreSQL settings for the load (as docs/operations.md recommends with many tenants): "
        + ", ".join(f"{k} = {v}" for k, v in facts.get("server_settings", {}).items())
        + ", then a checkpoint before the warm-ups. Each "
        f"request picks a random sub-account of its set and uses its key; the {SPREAD:,} and the "
        f"{FEW} are disjoint random picks among the {n_tenants:,}, each seeded with {CONTACTS} "
        f"contacts. {ROUNDS} rounds of {SECONDS:.0f} s of each load, the two taking turns in "
        f"{SLICE_SECONDS:g} s slices within a round (so a burst of other work on the machine "
        "lands on both), after a warm-up of "
        f"each of at least {WARMUP_PASSES:g} passes over its sub-accounts (the steady state of a "
        "running service: its pooled connections have met the schemas); answers other than "
        f"200/201: {errors}. The same sub-accounts serve every run, so before the load they are "
        "put back to their seeded state (this run removed "
        f"{facts['reset']['contacts']:,} contacts and {facts['reset']['notes']:,} notes that "
        "earlier runs had written, nearly all on the 10).",
        "",
        "| run | req/s | p50 ms | p95 ms | p99 ms | max ms | CPU ms/request: API / PostgreSQL "
        "| WAL KiB/request | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, run in enumerate(runs):
        s = summary(run.latencies)
        lines.append(
            f"| round {n // 2 + 1}, {run.label} | {run.rate:.0f} | {s['p50']:.1f} | "
            f"{s['p95']:.1f} | {s['p99']:.1f} | {max(run.latencies):.0f} | "
            f"{run.api_cpu_ms:.2f} / {run.pg_cpu_ms:.2f} | {run.wal_kib:.1f} | "
            f"{run.loadavg:.1f} |"
        )
    cpu = {}
    for label, s in ((few_label, few), (spread_label, spread)):
        mine = [r for r in runs if r.label == label]
        rate = sum(r.rate for r in mine) / len(mine)
        cpu[label] = (
            sum(r.api_cpu_ms for r in mine) / len(mine),
            sum(r.pg_cpu_ms for r in mine) / len(mine),
        )
        wal = sum(r.wal_kib for r in mine) / len(mine)
        lines.append(
            f"| **all rounds, {label}** | {rate:.0f} | {s['p50']:.1f} | "
            f"{s['p95']:.1f} | **{s['p99']:.1f}** | {max(pooled[label]):.0f} | "
            f"{cpu[label][0]:.2f} / {cpu[label][1]:.2f} | {wal:.1f} | |"
        )
    pairs = [
        summary(b.latencies)["p99"] / summary(a.latencies)["p99"]
        for a, b in zip(runs[0::2], runs[1::2], strict=True)
    ]
    later = sorted(pairs[1:]) or pairs
    spread_runs = runs[1::2]
    facts["cpu"] = cpu
    lines += [
        "",
        f"p99 ratio per round ({SPREAD:,} / {FEW}, same round, in order): "
        f"{', '.join(f'{x:.2f}' for x in pairs)} (median of rounds 2 on: "
        f"{later[len(later) // 2]:.2f}; PostgreSQL CPU per request over the {SPREAD:,} "
        f"{min(r.pg_cpu_ms for r in spread_runs):.2f} to "
        f"{max(r.pg_cpu_ms for r in spread_runs):.2f} ms). Cold start, not in the rounds: "
        "right after the server starts its pooled connections meet schemas whose catalog "
        "entries they have not cached; the warm-up's first passes over the "
        f"{SPREAD:,} had p99 {facts['memory'][f'warmup {spread_label}']['p99']:.1f} ms "
        f"(the {FEW}: {facts['memory'][f'warmup {few_label}']['p99']:.1f} ms). "
        f"CPU per request, {SPREAD:,} / {FEW}: API "
        f"{cpu[spread_label][0] / cpu[few_label][0]:.2f}x, PostgreSQL "
        f"{cpu[spread_label][1] / cpu[few_label][1]:.2f}x, both together "
        f"{sum(cpu[spread_label]) / sum(cpu[few_label]):.2f}x (CPU time of the API process and of "
        "its PostgreSQL backends over each round, divided by its requests: the cost of a request, "
        "which other work on the machine does not inflate the way it inflates latency). On this "
        f"shared 2-core machine a p99 over {RATE * SECONDS:,.0f} requests moves a lot from "
        "round to round, so "
        "read the p99 verdict together with the per-round ratios and the CPU ratio.",
        "",
        "Busy server backends, sampled every 0.2 s (running, or the wait event): "
        + "; ".join(
            f"{label}: "
            + (
                ", ".join(
                    f"{name} {count}"
                    for name, count in sum(
                        (r.waits for r in runs if r.label == label), Counter()
                    ).most_common(5)
                )
                or "none seen"
            )
            for label in (few_label, spread_label)
        )
        + ".",
    ]
    memory = facts["memory"]
    if all(memory.get(label) for label in (few_label, spread_label)):
        m = memory[spread_label]
        lines += [
            "",
            "PostgreSQL backends of the server after the rounds (private anonymous "
            f"memory, i.e. without shared buffers): {m['backends']} backends, max "
            f"{m['max_mib']:.0f} MiB, sum {m['sum_mib']:.0f} MiB.",
        ]
    lines += issue28_paragraphs(facts)
    if facts.get("warm"):
        lines += [
            "",
            "What a warm transaction costs by the number of schemas its connection serves "
            f"(the probe's four queries, {WARM_TRANSACTIONS:,} transactions round-robin over the "
            "set after two warming passes, the backend's own CPU time; its memory contexts): "
            + "; ".join(
                f"{size:,} schemas {w['cpu_ms']:.3f} ms CPU ({w['wall_ms']:.3f} ms wall, "
                f"{w['cache_mib']:.0f} MiB)"
                for size, w in facts["warm"].items()
            )
            + ". Everything is cached in each case: the difference is the working set's "
            "locality (catalog entries, plans and pages of many schemas), which fewer schemas "
            "per connection would recover only near the concentrated load's count.",
        ]
    probe = facts["probe"]
    lines += [
        "",
        f"Why many sub-accounts cost more per request: a PostgreSQL backend caches the catalog "
        f"entries (relcache, catcache, plans) of every relation it touches and never evicts them. "
        f"Probe: one new connection ran four tenant queries (contact by id, list of 20, notes of a "
        f"contact, wallet) in each of {probe['schemas']} schemas: the first pass took "
        f"{probe['cold_ms']:.2f} ms per schema, the second {probe['warm_ms']:.2f} ms, and the "
        f"backend's memory (all its memory contexts, nearly all of it CacheMemoryContext) grew "
        f"by {probe['kib_per_schema']:.0f} KiB per schema. Spread over "
        f"{SPREAD:,} sub-accounts, each of the server's pooled connections keeps meeting schemas "
        f"it has not touched yet (that is the PostgreSQL CPU above); concentrated on {FEW}, "
        "every connection has them all cached after the first seconds. On the API's side, "
        f"over {SPREAD:,} keys at {RATE:.0f} req/s a key comes back every "
        f"{SPREAD / RATE:.0f} s or so: within the key cache's 60 s (so no control.api_keys "
        "lookup), but in a new rate-limit window, so each such request takes a lease from Redis "
        f"(over {FEW} keys one lease serves 16 requests). The catalog cache is per "
        "connection and only grows: a connection that served every one of 10,000 sub-accounts "
        f"would hold about {probe['kib_per_schema'] * 10_000 / 1024:,.0f} MiB for these four "
        "tables alone.",
    ]
    build_text = (
        f"{build['created']:,} sub-accounts in {build['seconds']:.0f} s "
        f"({build['created'] / build['seconds']:.1f}/s, {build['concurrency']} at a time"
        f"{', resumed' if build.get('resumed') else ''}; built {build['when']}, load average "
        f"{build['loadavg']:.1f} at its end); one provisioning took p50 "
        f"{build['p50_first_ms']:.0f} ms over the first {build['chunk']:,} and "
        f"{build['p50_last_ms']:.0f} ms over the last {build['chunk']:,}"
        if build
        else "not built in this run"
    )
    catalogs = ", ".join(f"{name} {mib(size)}" for name, size in db["catalogs"].items())
    lines += [
        "",
        f"Build (the provisioning code path, `provision_sub_account`, with its invitation email to "
        f"a local SMTP sink): {build_text}.",
        "",
        f"Database at {n_tenants:,} sub-accounts: **{mib(db['size'])}** on disk "
        f"({per_tenant / 2**20:.2f} MiB per sub-account; an empty tenant schema's own files are "
        f"{db['per_tenant_bytes_files'] / 1024:.0f} KiB, the rest is catalog rows and the "
        f"seeded data); **{db['relations']:,} rows in pg_class** ({db['per_tenant_relations']} "
        f"relations in each tenant schema (tables, indexes, sequences) plus "
        f"{db['per_tenant_toast']} TOAST tables and indexes in pg_toast). Catalogs: {catalogs}."
        + (
            f" The whole data directory, WAL included: {mib(facts['data_dir_bytes'])}."
            if facts.get("data_dir_bytes")
            else ""
        ),
        "",
        f"`switchboard migrate` no-op: the control upgrade (alembic) plus one indexed query on "
        f"control.sub_accounts, so it does not grow with the schemas. Provisioning counts the "
        f"organisation's sub-accounts twice per request (`count(*)` on the organisation_id "
        f"index; at {facts['largest_org']:,} in the measured organisation: "
        f"{facts['count_ms']} ), the only per-request cost that grows with an organisation's "
        "size.",
        "",
        dump_paragraph(facts["dump_locks"], db["sub_accounts"]),
        "",
        citus_paragraph(facts, ratio, prov),
    ]
    return "\n".join(lines)


def pg_cpu_per_request(runs: list[Run], label: str) -> float:
    mine = [r for r in runs if r.label == label]
    return sum(r.pg_cpu_ms for r in mine) / max(1, len(mine))


def round_ratios(runs: list[Run]) -> list[float]:
    """p99 of the spread load over p99 of the few, round by round (runs alternate few, spread)."""
    return [
        summary(b.latencies)["p99"] / summary(a.latencies)["p99"]
        for a, b in zip(runs[0::2], runs[1::2], strict=True)
    ]


def issue28_rows(facts: dict[str, Any], runs: list[Run], verdict: Any) -> list[str]:
    """The table rows of issue 28's targets: relations, memory, spread cost, the rolling
    migration."""
    kinds = facts["db"]["relkinds"]
    few_label, spread_label = f"{FEW} sub-accounts", f"{SPREAD} sub-accounts"
    cpu_ratio = pg_cpu_per_request(runs, spread_label) / pg_cpu_per_request(runs, few_label)
    worst = max(round_ratios(runs))
    rows = [
        f"| pg_class rows per tenant schema (its relations and their TOAST) | "
        f"**{kinds['total']}** ("
        + ", ".join(f"{v} {k}" for k, v in kinds.items() if k != "total")
        + f") | at most {TARGET_RELATIONS} | {verdict(kinds['total'] <= TARGET_RELATIONS)} |",
        f"| PostgreSQL CPU per request, {SPREAD:,} / {FEW} sub-accounts | **{cpu_ratio:.2f}x** "
        f"| within {TARGET_CPU_RATIO}x | {verdict(cpu_ratio <= TARGET_CPU_RATIO)} |",
        f"| worst round's p99 ratio, {SPREAD:,} / {FEW} | **{worst:.2f}x** | every round within "
        f"{TARGET_P99_RATIO}x | {verdict(worst <= TARGET_P99_RATIO)} |",
    ]
    sweep = facts.get("sweep") or {}
    off = sweep.get("recycling off")
    for budget in SWEEP_BUDGETS:
        on = sweep.get(f"budget {budget}")
        if not (off and on and "peak_sum_mib" in on and "peak_sum_mib" in off):
            continue
        limit = backend_budget_mib(budget)
        rows.append(
            f"| PostgreSQL backend memory (private, summed over the server's backends) while "
            f"the load walks all {facts['db']['sub_accounts']:,} sub-accounts for "
            f"{SWEEP_SECONDS:.0f} s: budget {budget:,} tenants per connection / off | peak **"
            f"{on['peak_sum_mib']:,.0f} MiB** (largest backend {on['peak_max_mib']:,.0f}) / "
            f"{off['peak_sum_mib']:,.0f} MiB (largest {off['peak_max_mib']:,.0f}) | every backend "
            f"under {limit:,.0f} MiB | {verdict(on['peak_max_mib'] <= limit)} |"
        )
    roll = facts.get("roll")
    if roll:
        ok = roll["errors_5xx"] == 0 and roll["behind"] == 0 and roll["failed"] == 0
        rows.append(
            f"| rolling migration under the load (column with a default + index on contacts) "
            f"over {roll['tenants']:,} schemas | **{roll['seconds']:.0f} s**, "
            f"{roll['errors_5xx']} 5xx of {roll['requests']:,} requests, {roll['behind']} "
            f"behind, {roll['failed']} failed, p99 {roll['p99']:.1f} ms | zero 5xx, all at head "
            f"| {verdict(ok)} |"
        )
    return rows


def issue28_paragraphs(facts: dict[str, Any]) -> list[str]:
    stalls, roll, sweep = facts["stalls"], facts.get("roll"), facts.get("sweep") or {}
    lines = [
        "",
        f"Stalls (requests over {STALL_MS:.0f} ms in the rounds: {stalls['slow']} of "
        f"{stalls['requests']:,}). While the rounds ran the server logged "
        f"{stalls['checkpoints']} completed checkpoints, {stalls['lock_waits']} lock waits over "
        f"deadlock_timeout ({LOG_SETTINGS['deadlock_timeout']}) and {stalls['autovacuum']} "
        "autovacuum/autoanalyze runs over 100 ms; the API's event loop, probed with GET /healthz "
        "every 0.1 s, answered in "
        + (
            f"p50 {stalls['healthz']['p50']:.1f} ms, p99 {stalls['healthz']['p99']:.1f} ms, "
            f"max {stalls['healthz_max']:.0f} ms"
            if stalls["healthz"]
            else "(no samples)"
        )
        + ". The slowest requests, with what was seen around them (server waits sampled every "
        "0.2 s, the /healthz lag, log lines):",
        "",
    ]
    for d in stalls["details"][:8]:
        lines.append(
            f"- {d['at']} UTC {d['operation']} {d['ms']:.0f} ms: waits "
            f"{d['waits'] or 'none sampled'}, /healthz {d['healthz_ms']:.0f} ms"
            + (f", log: {'; '.join(d['log'])}" if d["log"] else "")
        )
    if roll:
        lines += [
            "",
            f"Rolling migration: `migrate_tenants` ({ROLL_CONCURRENCY} processes) applied a "
            "bench-only revision (contacts gets `bench_score integer NOT NULL DEFAULT 0` and an "
            f"index on it) to {roll['migrated']:,} of {roll['tenants']:,} schemas in "
            f"{roll['seconds']:.0f} s while the mixed load ran over {SPREAD:,} of them at "
            f"{RATE:.0f} req/s: {roll['requests']:,} requests, statuses {roll['statuses']}, p50 "
            f"{roll['p50']:.1f} ms, p99 {roll['p99']:.1f} ms; {roll['behind']} schemas behind "
            f"its head afterwards. Taken back out again in {roll['undo_seconds']:.0f} s.",
        ]
    lines += sweep_lines(sweep)
    return lines


def sweep_lines(sweep: dict[str, dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for label, m in sweep.items():
        if "samples" not in m:
            continue
        curve = ", ".join(
            f"{x['t']:.0f} s {x['sum_mib']:.0f}"
            for x in m["samples"][:: max(1, len(m["samples"]) // 8)]
        )
        lines += [
            "",
            f"Memory sweep, {label}: {m['requests']:,} requests ({m['passes']:.1f} passes over "
            f"every sub-account, in turn), errors {m['errors']}, p99 {m['p99']:.1f} ms; the "
            f"server's backends (private memory, MiB, summed) over time: {curve}; peak "
            f"{m.get('peak_sum_mib', 0):.0f} MiB over {m.get('peak_backends', 0)} backends, load "
            f"average {m.get('loadavg', 0):.1f} at its end, the API process used "
            f"{m.get('api_cpu_share', 0):.0%} of a core. "
            + sweep_stalls(m["stalls"])
            + (f" Failed: {'; '.join(m['problems'])}." if m["problems"] else ""),
        ]
    return lines


def sweep_stalls(stalls: dict[str, Any]) -> str:
    worst = stalls["details"][:3]
    return (
        f"Requests over {STALL_MS:.0f} ms: {stalls['slow']}; logged meanwhile: "
        f"{stalls['checkpoints']} checkpoints, {stalls['lock_waits']} lock waits, "
        f"{stalls['autovacuum']} autovacuum runs; /healthz max {stalls['healthz_max']:.0f} ms"
        + (
            "; the slowest: "
            + "; ".join(
                f"{d['ms']:.0f} ms ({d['operation']}, waits {d['waits'] or 'none sampled'}, "
                f"/healthz {d['healthz_ms']:.0f} ms{', log: ' + d['log'][0] if d['log'] else ''})"
                for d in worst
            )
            if worst
            else ""
        )
        + "."
    )


def dump_paragraph(locks: dict[str, Any], sub_accounts: int) -> str:
    slots = locks["max_locks"] * locks["max_connections"]
    needed = -(-int(locks["tables"] * 1.05) // locks["max_connections"])
    per_tenant = locks["tables"] / max(1, sub_accounts)
    text = (
        f"Backups: `pg_dump` of the whole database locks every table it dumps (ACCESS SHARE, "
        f"one transaction). A transaction taking that lock on all {locks['tables']:,} tenant "
        f"tables ({per_tenant:.0f} per sub-account) "
    )
    if locks["error"] is None:
        return text + (
            f"held them in the shared lock table (max_locks_per_transaction x max_connections = "
            f"{locks['max_locks']} x {locks['max_connections']} = {slots:,} slots); it stops "
            f"fitting at about {slots / per_tenant:,.0f} sub-accounts."
        )
    return text + (
        f"**failed** (`{locks['error']}`): the shared lock table has max_locks_per_transaction "
        f"x max_connections = {locks['max_locks']} x {locks['max_connections']} = {slots:,} "
        f"slots. A whole-database dump at this size needs max_locks_per_transaction of at least "
        f"about {needed} with {locks['max_connections']} connections (a server restart), or "
        "dumps per schema (`pg_dump -n`, or `switchboard tenants export`) or physical backups "
        "(pg_basebackup, WAL archiving), which take no table locks."
    )


def citus_paragraph(facts: dict[str, Any], ratio: float, prov: dict[str, float]) -> str:
    db = facts["db"]
    per_tenant_rows = db["per_tenant_relations"] + db["per_tenant_toast"]
    return (
        "**Extrapolating to a Citus cluster** (not measured on one; row-based distribution as "
        'in docs/operations.md "Citus": the shared tables of `tenant_data` distributed on '
        "`sub_account_id` and co-located, the control tables reference tables). *Scales with "
        "the number of workers N:* the tenant rows and the work on them (a request's tenant "
        "queries all name one sub-account, so Citus routes them to the one worker holding its "
        "shards). *Does not scale:* the coordinator's planning and routing of every request "
        "(unless the application connects to the workers), writes to the reference tables "
        f"(provisioning, p50 {prov['p50']:.0f} ms here, keys, due-work scheduling), and the "
        f"tenant schemas' views ({per_tenant_rows} pg_class rows per sub-account here), which "
        "stay on the coordinator. And first: Citus refuses writes through views over its "
        "tables, so tenant writes would have to name the shared tables (docs/operations.md)."
    )


def remember(url: str, facts: dict[str, Any], ratio: float) -> list[dict[str, Any]]:
    """Append this run's headline numbers to the kept database's history; return the history."""
    few_label, spread_label = f"{FEW} sub-accounts", f"{SPREAD} sub-accounts"
    cpu = facts["cpu"]
    entry = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": max(r.loadavg for r in facts["runs"]),
        "ratio": ratio,
        "cpu_ratio": (sum(cpu[spread_label]) / sum(cpu[few_label])),
        "rate": RATE,
        "seconds": SECONDS,
        "rounds": ROUNDS,
        "reset": True,
    }

    async def store() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(url)
        try:
            history: list[dict[str, Any]] = (await load_state(conn)).get("history", [])
            history.append(entry)
            await save_state(conn, "history", history)
            return history
        finally:
            await conn.close()

    return asyncio.run(store())


# --- main -----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("BENCH_SCALE_DATA_DIR"),
        help="keep an embedded PostgreSQL cluster here and reuse it",
    )
    parser.add_argument(
        "--build-only", action="store_true", help="build (or finish building) and stop"
    )
    parser.add_argument(
        "--sweep-only", action="store_true", help="build if needed, then only the memory sweeps"
    )
    args = parser.parse_args()
    facts: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    sink = Sink()
    smtp = Controller(sink, hostname="127.0.0.1", port=free_port())
    smtp.start()
    try:
        with place(args.data_dir) as where:
            print(f"database: {where.url} ({where.how})", flush=True)
            upgrade_control(where.url)
            os.environ.update({"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(smtp.port)})
            get_settings.cache_clear()
            built = asyncio.run(build(where.url))
            facts["build"] = built["build"]
            if args.build_only:
                print(f"built: {built['build']}", flush=True)
                return 0
            env = server_env(where, smtp.port)
            if args.sweep_only:
                sweeps = run_sweeps(env, free_port(), where.url, args.data_dir)
                print("\n".join(sweep_lines(sweeps)), flush=True)
                return 0
            accounts = built["accounts"]
            organisation = built["organisations"][0]
            from tenancy.keys import hash_key

            facts["db"] = asyncio.run(
                database_facts(where.url, organisation["id"], hash_key(accounts[0]["key"]))
            )
            facts["largest_org"] = asyncio.run(_org_size(where.url, organisation["id"]))
            facts["probe"] = asyncio.run(
                catalog_cache_probe(
                    where.url, [schema_name_for(uuid.UUID(a["id"])) for a in accounts[:500]]
                )
            )
            print(f"catalog cache probe: {facts['probe']}", flush=True)
            facts["warm"] = asyncio.run(warm_cost_probe(where.url))
            print(f"warm cost probe: {facts['warm']}", flush=True)
            facts["dump_locks"] = asyncio.run(dump_lock_check(where.url))
            print(f"pg_dump lock check: {facts['dump_locks']}", flush=True)
            plan = facts["db"]["count_plan"]
            facts["count_ms"] = next(
                (line.strip() for line in plan if "Execution Time" in line), "?"
            )
            print(
                f"database: {mib(facts['db']['size'])}, {facts['db']['relations']:,} pg_class rows",
                flush=True,
            )

            facts["migrate"] = migrate_runs(env)
            print(f"migrate no-op: {facts['migrate']}", flush=True)

            facts["server_settings"] = asyncio.run(server_settings(where.url))
            print(f"server settings for the load: {facts['server_settings']}", flush=True)
            facts["reset"] = asyncio.run(reset_accounts(where.url, accounts))
            print(
                f"measured sub-accounts reset to their seeded state: {facts['reset']}", flush=True
            )
            facts["load_before_load"] = os.getloadavg()[0]
            port = free_port()
            with serve(env, port) as api:
                rounds_began = time.time()
                runs, memory = asyncio.run(drive(port, where.url, accounts, api.pid))
                facts["runs"], facts["memory"] = runs, memory
                log_lines = server_log_lines(args.data_dir, rounds_began, time.time())
                facts["stalls"] = stall_evidence(runs, log_lines)
                print(f"stalls: {json.dumps(facts['stalls'], default=str)}", flush=True)
                if ROLL:
                    facts["roll"] = asyncio.run(
                        rolling_migration(port, where.url, accounts, api.pid)
                    )
                timings, created = provision_over_http(port, organisation["key"])
            facts["provision"] = timings
            asyncio.run(drop_sub_accounts(where.url, created))
            facts["sweep"] = {}
            if SWEEP_SECONDS > 0:
                facts["sweep"] = run_sweeps(env, port, where.url, args.data_dir)
            facts["load_end"] = os.getloadavg()[0]
            if args.data_dir:
                du = subprocess.run(
                    ["du", "-sb", str(Path(args.data_dir) / "postgres")],
                    capture_output=True,
                    text=True,
                )
                if du.returncode == 0:
                    facts["data_dir_bytes"] = int(du.stdout.split()[0])
            how = where.how
            body = report(facts)
            if where.kept:
                history = remember(where.url, facts, facts["ratio"])
                if len(history) > 1:
                    body += (
                        "\n\nRuns on this database (UTC, highest load average during the "
                        "rounds, p99 ratio, CPU-per-request ratio): "
                        + "; ".join(
                            f"{h['when']}: load {h['load']:.1f}, p99 {h['ratio']:.2f}x, "
                            f"CPU {h['cpu_ratio']:.2f}x"
                            + ("" if h.get("reset") else " (not reset)")
                            for h in history
                        )
                        + '. Runs marked "not reset" started from '
                        "what earlier runs had written (by the last of them, thousands of "
                        "contacts and notes on each of the 10, which slowed their reads): "
                        "their ratios flatter the 1,000."
                    )
    finally:
        smtp.stop()
    print(body)
    problems = [p for r in facts["runs"] for p in r.problems]
    for problem in problems[:10]:
        print("unexpected:", problem)
    if facts["db"]["sub_accounts"] >= 10_000 or os.environ.get("BENCH_SCALE_WRITE") == "1":
        write_section(f"Scale: {facts['db']['sub_accounts']:,} sub-accounts", body)
        print("written to bench/RESULTS.md")
    else:
        print("(not written to bench/RESULTS.md: fewer than 10,000 sub-accounts)")
    print(f"rerun the measurements on this database: {how}")
    return 1 if problems else 0


async def _org_size(url: str, organisation_id: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM control.sub_accounts WHERE organisation_id = $1",
                uuid.UUID(organisation_id),
            )
        )
    finally:
        await conn.close()


if __name__ == "__main__":
    raise SystemExit(main())
