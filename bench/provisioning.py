"""Provisioning latency: create-subaccount-webhook end to end over HTTP, 200 sub-accounts.

Baseline in the same run: the bare database work of one provisioning (CREATE SCHEMA + the tenant
DDL + the wallet row, in one transaction on asyncpg), so the ratio shows what the service adds.
Run: `python -m bench.provisioning` (uses DATABASE_URL / REDIS_URL when set, else embedded).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import asyncpg
import httpx
from aiosmtpd.controller import Controller

from bench.common import bench_servers, free_port, serve, summary, write_section
from tenancy.db import create_pool
from tenancy.migrate import upgrade_control
from tenancy.organisations import create_organisation
from tenancy.schema import create_tenant_schema

COUNT = int(os.environ.get("BENCH_PROVISION_COUNT", "200"))


class Sink:
    def __init__(self) -> None:
        self.count = 0

    async def handle_DATA(self, server, session, envelope):  # noqa: N802
        self.count += 1
        return "250 OK"


async def baseline(url: str, count: int) -> list[float]:
    conn = await asyncpg.connect(url)
    timings = []
    try:
        for _ in range(count):
            schema = f"t_{uuid.uuid4().hex}"
            started = time.perf_counter()
            async with conn.transaction():
                await create_tenant_schema(conn, schema)
                await conn.execute("INSERT INTO wallet (id, balance) VALUES (1, 0)")
            timings.append((time.perf_counter() - started) * 1000)
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await conn.close()
    return timings


def main() -> None:
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)

        async def organisation() -> str:
            pool = await create_pool(url, min_size=1, max_size=2)
            _, key = await create_organisation(pool, "Bench Agency", max_sub_accounts=100000)
            await pool.close()
            return key

        key = asyncio.run(organisation())
        sink = Sink()
        smtp = Controller(sink, hostname="127.0.0.1", port=free_port())
        smtp.start()
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(smtp.port),
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000",
        }
        timings: list[float] = []
        with (
            serve(env, port),
            httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"x-api-key": key}, timeout=30
            ) as client,
        ):
            for i in range(COUNT + 10):
                started = time.perf_counter()
                response = client.post(
                    "/functions/v1/create-subaccount-webhook",
                    json={"email": f"owner{i}@bench.example", "name": f"Bench {i}"},
                )
                elapsed = (time.perf_counter() - started) * 1000
                assert response.status_code == 201, response.text
                if i >= 10:  # the first requests warm connections and caches
                    timings.append(elapsed)
        smtp.stop()
        base = asyncio.run(baseline(url, COUNT))
    service, bare = summary(timings), summary(base)
    ok = service["p50"] < 150
    body = (
        f"Command: `python -m bench.provisioning` ({COUNT} sub-accounts, sequential, one "
        "client; each request creates the sub-account row, its schema at head, the wallet, the "
        "owner invitation, and sends the invitation email to a local SMTP sink before answering)."
        "\n\n| measure | p50 ms | p95 ms | p99 ms | mean ms |\n|---|---|---|---|---|\n"
        f"| create-subaccount-webhook over HTTP | {service['p50']:.1f} | {service['p95']:.1f} | "
        f"{service['p99']:.1f} | {service['mean']:.1f} |\n"
        f"| baseline: schema DDL + wallet on asyncpg | {bare['p50']:.1f} | {bare['p95']:.1f} | "
        f"{bare['p99']:.1f} | {bare['mean']:.1f} |\n\n"
        f"Ratio of p50 (service / baseline): {service['p50'] / bare['p50']:.2f}. "
        f"Target p50 under 150 ms: {'met' if ok else 'NOT met'}. Emails received: {sink.count}.\n"
    )
    write_section("Provisioning latency", body)
    print(body)


if __name__ == "__main__":
    main()
