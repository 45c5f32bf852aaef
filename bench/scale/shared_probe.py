"""Would shared tables make spread load cheap? The same four queries against one schema per
sub-account (today) and against shared tables keyed by sub-account, over 10 and over 1,000
sub-accounts, by the PostgreSQL backend's own CPU time, in one run.

`python -m bench.scale.shared_probe --data-dir DIR` on the database `python -m bench.scale`
built (10,000 sub-accounts). It first copies the contacts, notes and wallet of every tenant
schema into three tables of a schema of its own, `bench_shared` (kept for the next run; nothing
of the product's is changed), keyed by sub-account first, with the indexes the same queries need:

- schema per sub-account: `SET LOCAL search_path` to the tenant, then bench.scale's four probe
  queries (contact by id, list of 20 with a total, a contact's live notes, the wallet);
- shared tables: `set_config` of the sub-account, then the same four queries with
  `sub_account_id = $1` in each;
- shared tables with row-level security: `set_config` of the sub-account, then the four queries
  exactly as the tenant SQL is written today (no sub-account in them), as a role that is not the
  tables' owner, each table's policy `sub_account_id = current_setting(...)` adding it;
- shared tables, views per sub-account: a schema per sub-account (`bv_<hex>`, made for the
  first 1,000) holding only views of the shared tables limited to it, `SET LOCAL search_path` to
  it, then the four queries exactly as in the first layout.

One connection per (layout, set), warmed with two passes over its set; then BENCH_SHARED_ROUNDS
(5) rounds, each running BENCH_SHARED_TRANSACTIONS (2,000) round-robin transactions on every
connection in turn (so other work on the machine lands on all); the median round's CPU time per
transaction of each backend, and the ratio 1,000 / 10 for each layout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

import asyncpg

from bench.scale.__main__ import PROBE_QUERIES, median_rounds, place

SETS = (10, 1000)
ROUNDS = int(os.environ.get("BENCH_SHARED_ROUNDS", "5"))
TRANSACTIONS = int(os.environ.get("BENCH_SHARED_TRANSACTIONS", "2000"))

SHARED_DDL = """
CREATE SCHEMA bench_shared;
CREATE TABLE bench_shared.contacts (
    sub_account_id uuid NOT NULL, id uuid NOT NULL, name text, first_name text, email text,
    tags text[] NOT NULL DEFAULT '{}', created_at timestamptz NOT NULL,
    PRIMARY KEY (sub_account_id, id));
CREATE INDEX ON bench_shared.contacts (sub_account_id, created_at DESC, id DESC);
CREATE TABLE bench_shared.notes (
    sub_account_id uuid NOT NULL, id uuid NOT NULL, contact_id uuid NOT NULL, content text,
    created_at timestamptz NOT NULL, deleted_at timestamptz, PRIMARY KEY (sub_account_id, id));
CREATE INDEX ON bench_shared.notes (sub_account_id, contact_id, created_at DESC)
    WHERE deleted_at IS NULL;
CREATE TABLE bench_shared.wallets (
    sub_account_id uuid PRIMARY KEY, balance numeric(12, 2) NOT NULL);
"""

# bench.scale's probe queries, with the notes query as the product asks it (live notes only, the
# partial index's predicate), in both layouts.
SCHEMA_QUERIES = [
    *PROBE_QUERIES[:2],
    (
        "SELECT id, content FROM notes WHERE contact_id = $1 AND deleted_at IS NULL "
        "ORDER BY created_at DESC LIMIT 5",
        True,
    ),
    PROBE_QUERIES[3],
]
SHARED_QUERIES = [
    (
        "SELECT id, name, first_name, email, tags FROM bench_shared.contacts "
        "WHERE sub_account_id = $1 AND id = $2",
        True,
    ),
    (
        "SELECT id, email, count(*) OVER () AS total FROM bench_shared.contacts "
        "WHERE sub_account_id = $1 ORDER BY created_at DESC, id DESC LIMIT 20",
        False,
    ),
    (
        "SELECT id, content FROM bench_shared.notes WHERE sub_account_id = $1 "
        "AND contact_id = $2 AND deleted_at IS NULL ORDER BY created_at DESC LIMIT 5",
        True,
    ),
    ("SELECT balance FROM bench_shared.wallets WHERE sub_account_id = $1", False),
]


async def build_shared(url: str) -> dict[str, int]:
    """Copy every tenant's contacts, notes and wallet into bench_shared, once (a tenant per
    statement: one transaction would lock more relations than the server's lock table holds)."""
    conn = await asyncpg.connect(url)
    try:
        if await conn.fetchval("SELECT to_regclass('bench_shared.built') IS NOT NULL"):
            return await _shared_counts(conn)
        await conn.execute("DROP SCHEMA IF EXISTS bench_shared CASCADE")
        await conn.execute(SHARED_DDL)
        tenants = await conn.fetch("SELECT id, schema_name FROM control.sub_accounts ORDER BY id")
        started = time.perf_counter()
        for n, (sub_account_id, schema) in enumerate(tenants):
            await conn.execute(
                "INSERT INTO bench_shared.contacts SELECT $1, id, name, first_name, email, "
                f"coalesce(tags, '{{}}'), created_at FROM \"{schema}\".contacts",
                sub_account_id,
            )
            await conn.execute(
                "INSERT INTO bench_shared.notes SELECT $1, id, contact_id, content, "
                f'created_at, deleted_at FROM "{schema}".notes',
                sub_account_id,
            )
            await conn.execute(
                f'INSERT INTO bench_shared.wallets SELECT $1, balance FROM "{schema}".wallet',
                sub_account_id,
            )
            if n % 1000 == 999:
                print(f"  copied {n + 1} tenants", flush=True)
        await conn.execute(
            "ANALYZE bench_shared.contacts, bench_shared.notes, bench_shared.wallets"
        )
        await conn.execute("CREATE TABLE bench_shared.built ()")
        print(f"bench_shared built in {time.perf_counter() - started:.0f} s", flush=True)
        return await _shared_counts(conn)
    finally:
        await conn.close()


RLS_ROLE = "bench_shared_rls"
RLS_TABLES = ("contacts", "notes", "wallets")


async def set_up_rls(url: str) -> str:
    """Row-level security on the shared tables for a role that is not their owner (a superuser
    bypasses it): each table's rows are those of the transaction's `switchboard.sub_account_id`.
    Returns the URL to connect as that role."""
    conn = await asyncpg.connect(url)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", RLS_ROLE):
            await conn.execute(f"CREATE ROLE {RLS_ROLE} LOGIN")
        await conn.execute(f"GRANT USAGE ON SCHEMA bench_shared TO {RLS_ROLE}")
        await conn.execute(f"GRANT pg_read_all_stats TO {RLS_ROLE}")  # its own cache size
        for table in RLS_TABLES:
            await conn.execute(f"GRANT SELECT ON bench_shared.{table} TO {RLS_ROLE}")
            await conn.execute(f"ALTER TABLE bench_shared.{table} ENABLE ROW LEVEL SECURITY")
            await conn.execute(f"DROP POLICY IF EXISTS tenant ON bench_shared.{table}")
            await conn.execute(
                f"CREATE POLICY tenant ON bench_shared.{table} USING (sub_account_id = "
                "current_setting('switchboard.sub_account_id')::uuid)"
            )
    finally:
        await conn.close()
    server, database = url.rsplit("@", 1)
    return f"postgresql://{RLS_ROLE}@{database}"


VIEW_SCHEMA = "bv_{}"


async def set_up_views(url: str, tenants: list[asyncpg.Record]) -> None:
    """A schema per sub-account holding only views of the shared tables limited to it (the tenant
    SQL and `search_path` unchanged, the data shared): the relations per sub-account are its
    views."""
    conn = await asyncpg.connect(url)
    try:
        for sub_account_id, _ in tenants:
            schema = VIEW_SCHEMA.format(sub_account_id.hex)
            if await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", schema):
                continue
            key = f"'{sub_account_id}'::uuid"
            await conn.execute(
                f"CREATE SCHEMA {schema};"
                f"CREATE VIEW {schema}.contacts AS SELECT id, name, first_name, email, tags, "
                f"created_at FROM bench_shared.contacts WHERE sub_account_id = {key};"
                f"CREATE VIEW {schema}.notes AS SELECT id, contact_id, content, created_at, "
                f"deleted_at FROM bench_shared.notes WHERE sub_account_id = {key};"
                f"CREATE VIEW {schema}.wallet AS SELECT 1 AS id, balance "
                f"FROM bench_shared.wallets WHERE sub_account_id = {key};"
            )
    finally:
        await conn.close()


async def _shared_counts(conn: asyncpg.Connection) -> dict[str, int]:
    return {
        table: int(await conn.fetchval(f"SELECT count(*) FROM bench_shared.{table}"))
        for table in ("contacts", "notes", "wallets")
    }


async def schema_transaction(conn: asyncpg.Connection, schema: str) -> None:
    """The four queries in the tenant's schema, in one transaction."""
    async with conn.transaction():
        await conn.execute(f"SET LOCAL search_path TO {schema}, public")
        for query, with_id in SCHEMA_QUERIES:
            await conn.fetch(query, *([uuid.uuid4()] if with_id else []))


# The tenant SQL as it is written today (no sub-account in it): row-level security adds it.
RLS_QUERIES = [
    (
        query.replace("FROM ", "FROM bench_shared.").replace(".wallet WHERE id = 1", ".wallets"),
        with_id,
    )
    for query, with_id in SCHEMA_QUERIES
]


async def rls_transaction(conn: asyncpg.Connection, sub_account_id: uuid.UUID) -> None:
    """The four queries unchanged on the shared tables, the sub-account set for the policies."""
    async with conn.transaction():
        await conn.execute(
            "SELECT set_config('switchboard.sub_account_id', $1, true)", str(sub_account_id)
        )
        for query, with_id in RLS_QUERIES:
            await conn.fetch(query, *([uuid.uuid4()] if with_id else []))


async def shared_transaction(conn: asyncpg.Connection, sub_account_id: uuid.UUID) -> None:
    """The same four queries on the shared tables, in one transaction."""
    async with conn.transaction():
        await conn.execute(
            "SELECT set_config('switchboard.sub_account_id', $1, true)", str(sub_account_id)
        )
        for query, with_id in SHARED_QUERIES:
            await conn.fetch(query, sub_account_id, *([uuid.uuid4()] if with_id else []))


async def probe(url: str, rls_url: str) -> dict[tuple[str, int], dict[str, float]]:
    first = await asyncpg.connect(url)
    try:
        tenants = await first.fetch(
            "SELECT id, schema_name FROM control.sub_accounts ORDER BY id LIMIT $1", max(SETS)
        )
    finally:
        await first.close()
    layouts = {
        "schema per sub-account": lambda conn, n: schema_transaction(conn, tenants[n][1]),
        "shared tables": lambda conn, n: shared_transaction(conn, tenants[n][0]),
        "shared tables, row-level security": lambda conn, n: rls_transaction(conn, tenants[n][0]),
        "shared tables, views per sub-account": lambda conn, n: schema_transaction(
            conn, VIEW_SCHEMA.format(tenants[n][0].hex)
        ),
    }
    await set_up_views(url, tenants)
    conns = {
        (layout, size): await asyncpg.connect(rls_url if "row-level" in layout else url)
        for layout in layouts
        for size in SETS
    }
    try:
        for (layout, size), conn in conns.items():
            for n in list(range(size)) * 2:
                await layouts[layout](conn, n)
        # Row-level security really filters: another sub-account's rows are not seen.
        rls = conns["shared tables, row-level security", SETS[0]]
        async with rls.transaction():
            await rls.execute(
                "SELECT set_config('switchboard.sub_account_id', $1, true)", str(tenants[0][0])
            )
            seen = await rls.fetchval(
                "SELECT count(DISTINCT sub_account_id) FROM bench_shared.wallets"
            )
        assert seen == 1, f"row-level security let {seen} sub-accounts' wallets through"
        return await median_rounds(
            conns,
            lambda key, conn, n: layouts[key[0]](conn, n % key[1]),
            ROUNDS,
            TRANSACTIONS,
        )
    finally:
        for conn in conns.values():
            await conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale.shared_probe")
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_SCALE_DATA_DIR"))
    args = parser.parse_args()
    with place(args.data_dir) as where:
        counts = asyncio.run(build_shared(where.url))
        print(f"bench_shared rows: {counts}", flush=True)
        load = os.getloadavg()[0]
        rls_url = asyncio.run(set_up_rls(where.url))
        result = asyncio.run(probe(where.url, rls_url))
    print(f"\nload average at the start: {load:.1f}; end: {os.getloadavg()[0]:.1f}")
    print("| layout | sub-accounts | backend CPU ms per transaction | wall ms | cache MiB |")
    print("|---|---|---|---|---|")
    for (layout, size), row in result.items():
        print(
            f"| {layout} | {size:,} | {row['cpu_ms']:.3f} | {row['wall_ms']:.3f} | "
            f"{row['cache_mib']:.0f} |"
        )
    for layout in (
        "schema per sub-account",
        "shared tables",
        "shared tables, row-level security",
        "shared tables, views per sub-account",
    ):
        ratio = result[layout, SETS[1]]["cpu_ms"] / result[layout, SETS[0]]["cpu_ms"]
        print(f"{layout}: CPU per transaction, 1,000 / 10 = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
