"""/metrics, structured JSON logs with request and sub-account ids, and no secrets in them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import httpx

from tenancy.embedded import free_port
from tests.factories import make_agency


async def test_metrics_count_requests_by_route_and_status(client, tenant) -> None:
    await client.get("/webhooks/inbound/team-users", headers=tenant.headers)
    await client.get("/webhooks/inbound/team-users", headers={"x-api-key": "sb_wrong"})
    response = await client.get("/metrics")
    assert response.status_code == 200
    text = await response.get_data(as_text=True)
    assert (
        'switchboard_http_requests_total{method="GET",route="/webhooks/inbound/team-users",'
        'status="200"}'
    ) in text
    assert 'route="/webhooks/inbound/team-users",status="401"' in text
    assert "switchboard_http_request_duration_seconds_bucket" in text
    assert 'switchboard_db_pool_connections{state="in_use"}' in text
    assert "switchboard_queue_depth" in text
    assert "switchboard_due_work_lag_seconds" in text


async def test_metrics_count_job_runs_by_kind(app, client, run_worker) -> None:
    await app.app.config["ARQ"].enqueue_job("ping", "metrics")
    await run_worker()
    text = await (await client.get("/metrics")).get_data(as_text=True)
    line = next(
        line
        for line in text.splitlines()
        if line.startswith('switchboard_jobs_total{kind="ping",outcome="ok"}')
    )
    assert float(line.split()[-1]) >= 1


def test_serve_writes_json_logs_with_ids_and_no_keys(servers, pool, migrated) -> None:
    import asyncio

    agency = asyncio.run(_agency(migrated))
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
        "SWITCHBOARD_LOG_FORMAT": "json",
        "SMTP_PORT": str(free_port()),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        created = httpx.post(
            f"{base}/functions/v1/create-subaccount-webhook",
            json={"email": "o@example.com", "name": "Logged"},
            headers={"x-api-key": agency.key, "x-request-id": "req-log-1"},
        )
        assert created.status_code == 201
        sub_id = created.json()["sub_account_id"]
        key = httpx.post(
            f"{base}/functions/v1/agency/sub-accounts/{sub_id}/api-keys",
            headers={"x-api-key": agency.key},
        ).json()["api_key"]
        httpx.get(
            f"{base}/webhooks/inbound/team-users",
            headers={"x-api-key": key, "x-request-id": "req-log-2"},
        )
        httpx.get(
            f"{base}/webhooks/inbound/team-users", headers={"authorization": f"Bearer {key}x"}
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        output = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    access = {r["request_id"]: r for r in records if r["logger"] == "switchboard.access"}
    assert access["req-log-1"]["status"] == 201 and access["req-log-1"]["sub_account_id"] is None
    assert access["req-log-2"]["sub_account_id"] == sub_id
    assert access["req-log-2"]["route"] == "/webhooks/inbound/team-users"
    # The invitation email failed (no SMTP there) and was logged: still no secret anywhere.
    for secret in (agency.key, key, key + "x"):
        assert secret not in output


async def _agency(url: str):
    from tenancy.db import create_pool

    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        return await make_agency(pool)
    finally:
        await pool.close()


def test_worker_stops_cleanly_on_sigterm(servers, migrated) -> None:
    env = {**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "worker"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3)
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(40) == 0
    finally:
        if process.poll() is None:
            process.kill()


async def test_queue_depth_is_reported_for_every_queue(app, client) -> None:
    # given a job waiting on a queue of its own (as each kind of work has: jobs/worker.py)
    queue = f"arq:queue:observed-{uuid.uuid4().hex[:8]}"
    arq = app.app.config["ARQ"]
    await arq.enqueue_job("ping", "later", _queue_name=queue, _defer_by=3600)
    try:
        text = await (await client.get("/metrics")).get_data(as_text=True)
        assert f'switchboard_queue_depth{{queue="{queue}"}} 1.0' in text
    finally:
        await arq.delete(queue)
