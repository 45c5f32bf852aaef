"""GET /number-pools: newest first, each pool as GET /number-pools/{id} shows it."""

from __future__ import annotations

from tests.factories import BASE, import_number

POOLS = f"{BASE}/number-pools"


async def make_pool(client, tenant, name, number_ids):
    response = await client.post(
        POOLS, json={"name": name, "phone_number_ids": number_ids}, headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["pool"]


async def test_pools_are_listed_newest_first_as_the_single_read_shows_them(client, tenant, worker):
    one = await import_number(client, tenant, "+14155550101")
    two = await import_number(client, tenant, "+14155550102")
    first = await make_pool(client, tenant, "first", [two, one])
    second = await make_pool(client, tenant, "second", [one])
    released = await client.delete(f"{BASE}/phone-numbers/{one}", headers=tenant.headers)
    assert released.status_code == 200

    body = await (await client.get(POOLS, headers=tenant.headers)).get_json()

    singles = [
        (await (await client.get(f"{POOLS}/{pool['id']}", headers=tenant.headers)).get_json())[
            "pool"
        ]
        for pool in (second, first)
    ]
    assert body["number_pools"] == singles
    assert [pool["phone_number_ids"] for pool in body["number_pools"]] == [[], [two]]
    assert (body["total"], body["has_more"]) == (2, False)
    page = await (await client.get(f"{POOLS}?limit=1&offset=1", headers=tenant.headers)).get_json()
    assert [pool["id"] for pool in page["number_pools"]] == [first["id"]] and page["total"] == 2


async def test_another_sub_accounts_pools_are_not_listed(client, tenant, tenant_second, worker):
    number = await import_number(client, tenant_second, "+14155550103")
    await make_pool(client, tenant_second, "theirs", [number])
    body = await (await client.get(POOLS, headers=tenant.headers)).get_json()
    assert (body["number_pools"], body["total"]) == ([], 0)
