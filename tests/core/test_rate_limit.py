"""Per-key rate limiting on Redis (CONTRACT section 2), on an app built with low limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tests.factories import PLANS, SUB_ACCOUNTS, issue_key, make_agency

TEAM = "/webhooks/inbound/team-users"
# A window far longer than any test, so no test straddles two windows.
LONG_WINDOW = 1_000_000


@asynccontextmanager
async def limited_app(requests: int, window: int = LONG_WINDOW) -> AsyncIterator[Any]:
    from cli.wiring import build_app as create_app
    from tenancy.settings import Settings

    application = create_app(
        Settings(rate_limit_requests=requests, rate_limit_window_seconds=window)
    )
    async with application.test_app() as test_app:
        yield test_app.test_client()


async def fresh_key(client: Any, tenant: Any) -> dict[str, str]:
    """A sub-account key no other request has used yet."""
    return {"x-api-key": await issue_key(client, tenant.organisation.headers, str(tenant.id))}


async def test_keyed_responses_carry_ratelimit_headers(migrated, client, tenant):
    headers = await fresh_key(client, tenant)
    async with limited_app(5, window=60) as limited:
        response = await limited.get(TEAM, headers=headers)
    assert response.status_code == 200
    assert response.headers["RateLimit-Limit"] == "5"
    assert response.headers["RateLimit-Remaining"] == "4"
    assert 1 <= int(response.headers["RateLimit-Reset"]) <= 60
    assert "Retry-After" not in response.headers


async def test_remaining_counts_down(migrated, client, tenant):
    headers = await fresh_key(client, tenant)
    async with limited_app(5) as limited:
        remaining = [
            int((await limited.get(TEAM, headers=headers)).headers["RateLimit-Remaining"])
            for _ in range(5)
        ]
    assert remaining == [4, 3, 2, 1, 0]


async def test_error_answers_of_a_keyed_request_carry_headers(migrated, pool):
    agency = await make_agency(pool)
    async with limited_app(5) as limited:
        response = await limited.post(PLANS, json={"slug": 5}, headers=agency.headers)
    assert response.status_code == 400
    assert response.headers["RateLimit-Limit"] == "5"


async def test_401_answers_carry_no_ratelimit_headers(migrated):
    async with limited_app(5) as limited:
        for headers in ({}, {"x-api-key": "sb_" + "z" * 43}):
            response = await limited.get(TEAM, headers=headers)
            assert response.status_code == 401
            for name in (
                "RateLimit-Limit",
                "RateLimit-Remaining",
                "RateLimit-Reset",
                "Retry-After",
            ):
                assert name not in response.headers


async def test_over_the_limit_is_429_with_retry_after(migrated, client, tenant):
    headers = await fresh_key(client, tenant)
    async with limited_app(5, window=60) as limited:
        for _ in range(5):
            assert (await limited.get(TEAM, headers=headers)).status_code == 200
        response = await limited.get(TEAM, headers=headers)
    assert response.status_code == 429
    body = await response.get_json()
    assert body["status"] == "error" and body["error"]["code"] == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert response.headers["RateLimit-Remaining"] == "0"
    assert response.headers["RateLimit-Limit"] == "5"
    assert response.headers["X-Request-ID"]


async def test_429_under_functions_uses_success_false(migrated, pool):
    agency = await make_agency(pool)
    async with limited_app(1) as limited:
        assert (await limited.get(SUB_ACCOUNTS, headers=agency.headers)).status_code == 200
        response = await limited.get(SUB_ACCOUNTS, headers=agency.headers)
    assert response.status_code == 429
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "rate_limited"


async def test_refused_request_changes_nothing(migrated, pool):
    agency = await make_agency(pool)
    async with limited_app(1) as limited:
        await limited.get(SUB_ACCOUNTS, headers=agency.headers)
        response = await limited.post(
            PLANS, json={"slug": "late", "name": "Late"}, headers=agency.headers
        )
    assert response.status_code == 429
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.plans WHERE organisation_id = $1", agency.id
        )
        == 0
    )


async def test_limit_is_atomic_under_concurrency(migrated, client, tenant):
    headers = await fresh_key(client, tenant)
    async with limited_app(10) as limited:
        responses = await asyncio.gather(*(limited.get(TEAM, headers=headers) for _ in range(30)))
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] * 10 + [429] * 20


async def test_separate_keys_have_separate_budgets(migrated, client, tenant):
    first = await fresh_key(client, tenant)
    second = await fresh_key(client, tenant)
    async with limited_app(3) as limited:
        for _ in range(3):
            await limited.get(TEAM, headers=first)
        assert (await limited.get(TEAM, headers=first)).status_code == 429
        response = await limited.get(TEAM, headers=second)
        assert response.status_code == 200
        assert response.headers["RateLimit-Remaining"] == "2"


async def test_bearer_and_x_api_key_share_one_budget(migrated, client, tenant):
    headers = await fresh_key(client, tenant)
    bearer = {"authorization": f"Bearer {headers['x-api-key']}"}
    async with limited_app(2) as limited:
        assert (await limited.get(TEAM, headers=headers)).status_code == 200
        assert (await limited.get(TEAM, headers=bearer)).status_code == 200
        assert (await limited.get(TEAM, headers=bearer)).status_code == 429


async def test_counting_goes_on_when_redis_has_forgotten_the_script(migrated, client, tenant):
    """After a Redis restart (or SCRIPT FLUSH) the limiter loads its script again."""
    import redis.asyncio as aioredis

    from tenancy.settings import get_settings

    headers = await fresh_key(client, tenant)
    async with limited_app(5) as limited:
        first = await limited.get(TEAM, headers=headers)
        redis = aioredis.from_url(get_settings().redis_url)
        try:
            await redis.script_flush()
        finally:
            await redis.aclose()
        second = await limited.get(TEAM, headers=headers)
        third = await limited.get(TEAM, headers=headers)
    assert [r.status_code for r in (first, second, third)] == [200, 200, 200]
    assert [r.headers["RateLimit-Remaining"] for r in (first, second, third)] == ["4", "3", "2"]


async def test_a_busy_key_counts_exactly_in_one_process(migrated, client, tenant):
    """Grants are taken from Redis in batches; spent one by one, the headers stay exact."""
    headers = await fresh_key(client, tenant)
    async with limited_app(120) as limited:
        responses = [await limited.get(TEAM, headers=headers) for _ in range(125)]
    assert [r.status_code for r in responses] == [200] * 120 + [429] * 5
    remaining = [int(r.headers["RateLimit-Remaining"]) for r in responses[:120]]
    assert remaining == list(range(119, -1, -1))
    assert all(r.headers["Retry-After"] for r in responses[120:])


async def test_processes_sharing_redis_never_admit_more_than_the_limit(migrated, client, tenant):
    """Two API processes (two apps, one Redis) under concurrent load on one key: together never
    past the limit, and refusing early by no more than the grants the other still holds."""
    headers = await fresh_key(client, tenant)
    async with limited_app(60) as first, limited_app(60) as second:
        responses = await asyncio.gather(
            *((first if n % 2 else second).get(TEAM, headers=headers) for n in range(150))
        )
    statuses = [response.status_code for response in responses]
    assert set(statuses) == {200, 429}
    assert 60 - 2 * 6 <= statuses.count(200) <= 60
