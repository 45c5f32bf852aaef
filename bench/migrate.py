"""`switchboard migrate` over 1,000 tenant schemas: the no-op check, and one new migration.

Baseline in the same run: the same COMMENT ON VIEW sent to every schema by one bare asyncpg loop
(no alembic, no bookkeeping). Run: `python -m bench.migrate` (BENCH_TENANTS to change 1,000).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

from bench.common import bench_servers, write_section
from tenancy.db import create_pool, schema_name_for
from tenancy.migrate import migrate_tenants, tenants_behind, upgrade_control
from tenancy.organisations import create_organisation
from tenancy.schema import MIGRATIONS_DIR, create_tenant_schema, tenant_head

TENANTS = int(os.environ.get("BENCH_TENANTS", "1000"))
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "4"))

NEW_MIGRATION = '''"""bench: a note on the wallet view"""
from alembic import op

revision = "tbench"
down_revision = {head!r}
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("COMMENT ON VIEW wallet IS 'bench note'")


def downgrade() -> None:
    op.execute("COMMENT ON VIEW wallet IS NULL")
'''


async def create_tenants(url: str, count: int) -> None:
    """Sub-account rows and schemas at head, as provisioning writes them (without HTTP/email)."""
    pool = await create_pool(url, min_size=4, max_size=8)
    organisation_id, _ = await create_organisation(pool, "Bench", max_sub_accounts=1_000_000)
    head = tenant_head()

    async def one(i: int) -> None:
        sid = uuid.uuid4()
        schema = schema_name_for(sid)
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO control.sub_accounts (id, organisation_id, name, slug, schema_name, "
                "schema_version) VALUES ($1, $2, $3, $4, $5, $6)",
                sid,
                organisation_id,
                f"Bench {i}",
                f"bench-{sid.hex}",
                schema,
                head,
            )
            await create_tenant_schema(conn, schema)
            await conn.execute("INSERT INTO wallet (id, balance) VALUES (1, 0)")

    semaphore = asyncio.Semaphore(8)

    async def guarded(i: int) -> None:
        async with semaphore:
            await one(i)

    await asyncio.gather(*(guarded(i) for i in range(count)))
    await pool.close()


async def baseline_alter(url: str) -> float:
    conn = await asyncpg.connect(url)
    schemas = [r[0] for r in await conn.fetch("SELECT schema_name FROM control.sub_accounts")]
    started = time.perf_counter()
    for schema in schemas:
        await conn.execute(f"COMMENT ON VIEW \"{schema}\".wallet IS 'baseline note'")
    elapsed = time.perf_counter() - started
    for schema in schemas:
        await conn.execute(f'COMMENT ON VIEW "{schema}".wallet IS NULL')
    await conn.close()
    return elapsed


def main() -> None:
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)
        started = time.perf_counter()
        asyncio.run(create_tenants(url, TENANTS))
        created = time.perf_counter() - started
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url}

        started = time.perf_counter()
        check = tenants_behind(url, tenant_head())
        check_seconds = time.perf_counter() - started
        assert check == []
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "cli", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        noop_cli = time.perf_counter() - started
        assert done.returncode == 0 and "all tenant schemas at head" in done.stderr, done.stderr

        scripts = Path(tempfile.mkdtemp()) / "tenant"
        shutil.copytree(MIGRATIONS_DIR / "tenant", scripts)
        (scripts / "versions" / "2099_01_01_tbench.py").write_text(
            NEW_MIGRATION.format(head=tenant_head())
        )
        started = time.perf_counter()
        report = migrate_tenants(url, concurrency=CONCURRENCY, script_location=scripts)
        apply_seconds = time.perf_counter() - started
        assert report.ok and len(report.migrated) == TENANTS, report.failed
        baseline = asyncio.run(baseline_alter(url))
        shutil.rmtree(scripts.parent, ignore_errors=True)

    body = (
        f"Command: `python -m bench.migrate` ({TENANTS} tenant schemas, concurrency "
        f"{CONCURRENCY}; creating them took {created:.1f} s).\n\n"
        "| measure | seconds | target |\n|---|---|---|\n"
        f"| no-op check (one query on control.sub_accounts) | {check_seconds:.3f} | |\n"
        f"| `switchboard migrate` no-op, whole process | {noop_cli:.2f} | under 5 s |\n"
        f"| one new trivial migration applied to every tenant | {apply_seconds:.2f} "
        "| under 60 s |\n"
        f"| baseline: bare asyncpg loop of the same COMMENT ON VIEW | {baseline:.2f} | |\n\n"
        f"Ratio apply / baseline: {apply_seconds / baseline:.2f} (alembic per tenant, one "
        "transaction each with its version bookkeeping, spread over worker processes).\n"
    )
    write_section(f"Migrations over {TENANTS} tenants", body)
    print(body)


if __name__ == "__main__":
    main()
