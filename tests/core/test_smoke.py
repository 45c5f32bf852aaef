async def test_healthz(client):
    response = await client.get("/healthz")
    assert response.status_code == 200


async def test_provision_and_key(client, tenant):
    response = await client.get("/webhooks/inbound/team-users", headers=tenant.headers)
    assert response.status_code == 200
    assert (await response.get_json()) == {
        "status": "success",
        "users": [],
        "total": 0,
        "limit": 50,
        "offset": 0,
        "has_more": False,
    }


async def test_worker_runs_a_job(app, run_worker):
    job = await app.app.config["ARQ"].enqueue_job("ping", "x")
    worker = await run_worker()
    assert worker.jobs_complete >= 1
    assert await job.result(timeout=5) == "pong:x"
