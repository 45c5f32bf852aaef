"""Writes through a tenant's views against the same writes into tables of its own, in one run.

`python -m bench.scale.write_probe --data-dir DIR` on the database `python -m bench.scale`
built. One connection builds a scratch schema `ab_tables` from the tenant tables' DDL at t0017
(migrations/tenant/sql/t0017_tables.sql: the layout before the rows moved to tenant_data), then
alternates, twice, BENCH_WRITE_TRANSACTIONS (2,000) transactions of a contact insert, an update
of it and a note on it, into that schema and into one sub-account's schema of views; each
block's backend CPU time per transaction. The scratch schema is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

import asyncpg
import psutil

from bench.scale.__main__ import place
from tenancy.schema import MIGRATIONS_DIR

TRANSACTIONS = int(os.environ.get("BENCH_WRITE_TRANSACTIONS", "2000"))
SCRATCH = "ab_tables"


async def writes(conn: asyncpg.Connection, schema: str) -> float:
    """TRANSACTIONS write transactions in `schema`; the backend's CPU ms per transaction."""
    backend = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))
    before = sum(backend.cpu_times()[:2])
    for n in range(TRANSACTIONS):
        async with conn.transaction():
            await conn.execute(f"SET LOCAL search_path TO {schema}, public")
            contact_id = await conn.fetchval(
                "INSERT INTO contacts (name, first_name, email, phone, tags) "
                "VALUES ($1, 'Ab', $2, $3, $4) RETURNING id",
                f"Ab Tester {n}",
                f"ab{n}-{uuid.uuid4().hex[:8]}@example.com",
                f"+1{uuid.uuid4().int % 10**12:012d}",
                ["tag1", "tag2"],
            )
            await conn.execute(
                "UPDATE contacts SET first_name = 'B', updated_at = now() WHERE id = $1", contact_id
            )
            await conn.execute(
                "INSERT INTO notes (contact_id, content) VALUES ($1, 'a note')", contact_id
            )
    return float(sum(backend.cpu_times()[:2]) - before) * 1000 / TRANSACTIONS


async def probe(url: str) -> list[tuple[str, float]]:
    conn = await asyncpg.connect(url)
    try:
        tenant = await conn.fetchval(
            "SELECT schema_name FROM control.sub_accounts ORDER BY created_at DESC LIMIT 1"
        )
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCRATCH} CASCADE; CREATE SCHEMA {SCRATCH}")
        async with conn.transaction():
            await conn.execute(f"SET LOCAL search_path TO {SCRATCH}, public")
            await conn.execute((MIGRATIONS_DIR / "tenant" / "sql" / "t0017_tables.sql").read_text())
        results = []
        for _ in range(2):
            results.append(("own tables (t0017)", await writes(conn, SCRATCH)))
            results.append(("views over tenant_data", await writes(conn, tenant)))
        await conn.execute(f"DROP SCHEMA {SCRATCH} CASCADE")
        return results
    finally:
        await conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale.write_probe")
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_SCALE_DATA_DIR"))
    args = parser.parse_args()
    with place(args.data_dir) as where:
        started = time.perf_counter()
        for label, cpu_ms in asyncio.run(probe(where.url)):
            print(f"{label}: {cpu_ms:.3f} ms backend CPU per transaction", flush=True)
    print(f"({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
