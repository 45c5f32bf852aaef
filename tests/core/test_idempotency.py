"""Idempotency-Key on POST: replay the first answer, 422 on another body, 409 while running."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

from tests.factories import make_agency


def _plan(slug: str, name: str = "Gold") -> dict:
    return {"slug": slug, "name": name}


async def _plan_count(pool, organisation_id, slug) -> int:
    return await pool.fetchval(
        "SELECT count(*) FROM control.plans WHERE organisation_id = $1 AND slug = $2",
        organisation_id,
        slug,
    )


async def test_repeat_with_same_body_replays_first_response_and_runs_once(
    client, agency, pool
) -> None:
    headers = {**agency.headers, "Idempotency-Key": f"k-{uuid.uuid4()}"}
    slug = f"p{uuid.uuid4().hex[:8]}"
    first = await client.post("/functions/v1/agency/plans", json=_plan(slug), headers=headers)
    # Same content, other key order: still the same request.
    second = await client.post(
        "/functions/v1/agency/plans", json={"name": "Gold", "slug": slug}, headers=headers
    )
    assert first.status_code == second.status_code == 201
    assert await first.get_json() == await second.get_json()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert await _plan_count(pool, agency.id, slug) == 1


async def test_repeat_with_a_different_body_is_422(client, agency, pool) -> None:
    headers = {**agency.headers, "Idempotency-Key": "same-key-other-body"}
    slug = f"p{uuid.uuid4().hex[:8]}"
    assert (
        await client.post("/functions/v1/agency/plans", json=_plan(slug), headers=headers)
    ).status_code == 201
    other = await client.post("/functions/v1/agency/plans", json=_plan(slug + "x"), headers=headers)
    assert other.status_code == 422
    assert (await other.get_json())["error"]["code"] == "idempotency_key_reused"
    assert await _plan_count(pool, agency.id, slug + "x") == 0


async def test_repeat_while_the_first_is_running_is_409(client, agency, pool) -> None:
    key_id = await pool.fetchval(
        "SELECT id FROM control.api_keys WHERE organisation_id = $1", agency.id
    )
    slug = f"p{uuid.uuid4().hex[:8]}"
    body = f'{{"name":"Gold","slug":"{slug}"}}'.encode()
    digest = hashlib.sha256(b"POST /functions/v1/agency/plans\n" + body).digest()
    await pool.execute(
        "INSERT INTO control.idempotency_keys (api_key_id, key, request_hash, locked_until) "
        "VALUES ($1, 'running-key', $2, now() + interval '1 minute')",
        key_id,
        digest,
    )
    response = await client.post(
        "/functions/v1/agency/plans",
        json=_plan(slug),
        headers={**agency.headers, "Idempotency-Key": "running-key"},
    )
    assert response.status_code == 409
    assert (await response.get_json())["error"]["code"] == "idempotency_key_in_progress"
    assert await _plan_count(pool, agency.id, slug) == 0


async def test_concurrent_repeats_run_the_operation_once(client, agency, pool) -> None:
    headers = {**agency.headers, "Idempotency-Key": "concurrent"}
    slug = f"p{uuid.uuid4().hex[:8]}"
    responses = await asyncio.gather(
        *(
            client.post("/functions/v1/agency/plans", json=_plan(slug), headers=headers)
            for _ in range(10)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(201) >= 1 and set(statuses) <= {201, 409}
    assert await _plan_count(pool, agency.id, slug) == 1


async def test_error_answers_are_replayed_too(client, agency) -> None:
    slug = f"p{uuid.uuid4().hex[:8]}"
    await client.post("/functions/v1/agency/plans", json=_plan(slug), headers=agency.headers)
    headers = {**agency.headers, "Idempotency-Key": "dup-slug"}
    first = await client.post("/functions/v1/agency/plans", json=_plan(slug), headers=headers)
    again = await client.post("/functions/v1/agency/plans", json=_plan(slug), headers=headers)
    assert first.status_code == again.status_code == 409
    assert again.headers["Idempotent-Replayed"] == "true"


async def test_keys_are_scoped_to_the_api_key(client, agency, pool) -> None:
    other = await make_agency(pool)
    slug = f"p{uuid.uuid4().hex[:8]}"
    for who in (agency, other):
        response = await client.post(
            "/functions/v1/agency/plans",
            json=_plan(slug),
            headers={**who.headers, "Idempotency-Key": "shared"},
        )
        assert response.status_code == 201
        assert "Idempotent-Replayed" not in response.headers


async def test_a_key_older_than_24_hours_runs_again(client, agency, pool) -> None:
    headers = {**agency.headers, "Idempotency-Key": "old-key"}
    slug = f"p{uuid.uuid4().hex[:8]}"
    await client.post("/functions/v1/agency/plans", json=_plan(slug), headers=headers)
    await pool.execute(
        "UPDATE control.idempotency_keys SET created_at = now() - "
        "interval '25 hours' WHERE key = 'old-key'"
    )
    again = await client.post("/functions/v1/agency/plans", json=_plan(slug), headers=headers)
    assert again.status_code == 409  # ran again: the slug now exists
    assert "Idempotent-Replayed" not in again.headers


async def test_a_malformed_key_is_400(client, agency) -> None:
    response = await client.post(
        "/functions/v1/agency/plans",
        json=_plan("pmal"),
        headers={**agency.headers, "Idempotency-Key": "x" * 256},
    )
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "invalid_idempotency_key"


async def test_the_housekeeping_job_forgets_keys_past_24_hours(client, agency, pool) -> None:
    from tenancy.maintenance import purge_idempotency_keys

    headers = {**agency.headers, "Idempotency-Key": "to-purge"}
    await client.post(
        "/functions/v1/agency/plans", json=_plan(f"p{uuid.uuid4().hex[:8]}"), headers=headers
    )
    await pool.execute(
        "UPDATE control.idempotency_keys SET created_at = now() - "
        "interval '25 hours' WHERE key = 'to-purge'"
    )
    assert await purge_idempotency_keys({"db": pool}) >= 1
    assert (
        await pool.fetchval("SELECT count(*) FROM control.idempotency_keys WHERE key = 'to-purge'")
        == 0
    )
