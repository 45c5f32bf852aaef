"""Number pools: create and read; their round robin is exercised in test_calls.py."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import import_number
from tests.helpers import expect_error, tenant_sql

POOLS = "/webhooks/inbound/number-pools"


async def pool_count(pool, tenant):
    return (await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM number_pools"))[0]["n"]


async def test_create_pool_is_201_with_its_numbers_in_order(client, tenant, worker):
    first = await import_number(client, tenant, "+14155550101")
    second = await import_number(client, tenant, "+14155550102")
    response = await client.post(
        POOLS,
        json={"name": "Outbound", "phone_number_ids": [second, first, second]},
        headers=tenant.headers,
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success"
    assert body["pool"]["name"] == "Outbound"
    assert body["pool"]["phone_number_ids"] == [second, first]
    read = await client.get(f"{POOLS}/{body['pool']['id']}", headers=tenant.headers)
    assert read.status_code == 200
    assert (await read.get_json())["pool"] == body["pool"]


@pytest.mark.parametrize(
    "body",
    [
        {"phone_number_ids": []},
        {"name": "", "phone_number_ids": []},
        {"name": "Pool"},
        {"name": "Pool", "phone_number_ids": []},
        {"name": "Pool", "phone_number_ids": "x"},
        {"name": 5, "phone_number_ids": []},
    ],
)
async def test_create_pool_invalid_body_is_400(client, pool, tenant, body):
    response = await client.post(POOLS, json=body, headers=tenant.headers)
    await expect_error(response, 400, "validation_error")
    assert await pool_count(pool, tenant) == 0


async def test_create_pool_non_uuid_number_id_is_400(client, pool, tenant):
    response = await client.post(
        POOLS, json={"name": "Pool", "phone_number_ids": ["nope"]}, headers=tenant.headers
    )
    await expect_error(response, 400, "invalid_uuid")
    assert await pool_count(pool, tenant) == 0


async def test_create_pool_unknown_number_is_404(client, pool, tenant, worker):
    own = await import_number(client, tenant, "+14155550101")
    response = await client.post(
        POOLS,
        json={"name": "Pool", "phone_number_ids": [own, str(uuid.uuid4())]},
        headers=tenant.headers,
    )
    await expect_error(response, 404, "not_found")
    assert await pool_count(pool, tenant) == 0


async def test_create_pool_with_another_sub_accounts_number_is_404(
    client, pool, tenant, tenant_second, worker
):
    other = await import_number(client, tenant_second, "+14155550101")
    response = await client.post(
        POOLS, json={"name": "Pool", "phone_number_ids": [other]}, headers=tenant.headers
    )
    await expect_error(response, 404, "not_found")
    assert await pool_count(pool, tenant) == 0


async def test_create_pool_with_a_released_number_is_404(client, tenant, worker):
    number_id = await import_number(client, tenant, "+14155550101")
    assert (
        await client.delete(f"/webhooks/inbound/phone-numbers/{number_id}", headers=tenant.headers)
    ).status_code == 200
    response = await client.post(
        POOLS, json={"name": "Pool", "phone_number_ids": [number_id]}, headers=tenant.headers
    )
    await expect_error(response, 404, "not_found")


async def test_get_pool_invalid_id_is_400_and_missing_is_404(client, tenant):
    await expect_error(await client.get(f"{POOLS}/x", headers=tenant.headers), 400, "invalid_uuid")
    await expect_error(
        await client.get(f"{POOLS}/{uuid.uuid4()}", headers=tenant.headers), 404, "not_found"
    )


async def test_pool_of_another_sub_account_is_404(client, tenant, tenant_second, worker):
    other = await import_number(client, tenant_second, "+14155550101")
    created = await client.post(
        POOLS, json={"name": "Theirs", "phone_number_ids": [other]}, headers=tenant_second.headers
    )
    pool_id = (await created.get_json())["pool"]["id"]
    await expect_error(
        await client.get(f"{POOLS}/{pool_id}", headers=tenant.headers), 404, "not_found"
    )


async def test_released_number_leaves_its_pools(client, tenant, worker):
    first = await import_number(client, tenant, "+14155550101")
    second = await import_number(client, tenant, "+14155550102")
    created = await client.post(
        POOLS, json={"name": "Pool", "phone_number_ids": [first, second]}, headers=tenant.headers
    )
    pool_id = (await created.get_json())["pool"]["id"]
    assert (
        await client.delete(f"/webhooks/inbound/phone-numbers/{first}", headers=tenant.headers)
    ).status_code == 200
    read = await (await client.get(f"{POOLS}/{pool_id}", headers=tenant.headers)).get_json()
    assert read["pool"]["phone_number_ids"] == [second]
