"""The lists CONTRACT 7 adds (campaigns, invoices, calls, number pools) share the general rule:
limit 1..100 (default 50), offset >= 0, total/limit/offset/has_more, newest first, and a bad
filter or page value is 400 validation_error."""

from __future__ import annotations

import pytest

from tests.factories import BASE, create_campaign
from tests.helpers import expect_error

LISTS = {
    "campaigns": "campaigns",
    "invoices": "invoices",
    "calls": "calls",
    "number-pools": "number_pools",
}


@pytest.mark.parametrize(("path", "key"), LISTS.items())
async def test_empty_list_has_the_general_envelope(client, tenant, path, key):
    response = await client.get(f"{BASE}/{path}", headers=tenant.headers)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        key: [],
        "total": 0,
        "limit": 50,
        "offset": 0,
        "has_more": False,
    }


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=101",
        "limit=-1",
        "limit=x",
        "offset=-1",
        "offset=x",
        "offset=1000000000000000000",
    ],
)
async def test_bad_page_values_are_400(client, tenant, path, query):
    response = await client.get(f"{BASE}/{path}?{query}", headers=tenant.headers)
    await expect_error(response, 400, "validation_error")


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("campaigns", "status=nope"),
        ("campaigns", "status=DRAFT"),
        ("campaigns", "status=draft&status=paused"),
        ("invoices", "status=open"),
        ("invoices", "contact_id=nope"),
        ("invoices", "contact_id=0d4c5a3e8c8a4bd5a2a6f1d1f1a1b1c1"),
        ("calls", "status=done"),
        ("calls", "direction=sideways"),
        ("calls", "contact_id=1"),
        ("calls", "agent_id=" + "g" * 8 + "-0000-0000-0000-000000000000"),
    ],
)
async def test_bad_filter_values_are_400_naming_the_filter(client, tenant, path, query):
    response = await client.get(f"{BASE}/{path}?{query}", headers=tenant.headers)
    body = await expect_error(response, 400, "validation_error")
    assert body["error"]["details"][0]["field"] == query.split("=")[0]


@pytest.mark.parametrize("path", LISTS)
async def test_lists_need_a_sub_account_key(client, tenant, path):
    await expect_error(await client.get(f"{BASE}/{path}"), 401, "missing_api_key")
    response = await client.get(f"{BASE}/{path}", headers=tenant.organisation.headers)
    await expect_error(response, 401, "invalid_api_key")


async def test_pages_walk_newest_first_with_has_more(client, tenant):
    made = [(await create_campaign(client, tenant, name=f"c{index}"))["id"] for index in range(5)]
    first = await (await client.get(f"{BASE}/campaigns?limit=2", headers=tenant.headers)).get_json()
    last = await (
        await client.get(f"{BASE}/campaigns?limit=2&offset=4", headers=tenant.headers)
    ).get_json()
    past = await (
        await client.get(f"{BASE}/campaigns?limit=2&offset=9", headers=tenant.headers)
    ).get_json()
    assert [c["id"] for c in first["campaigns"]] == made[::-1][:2]
    assert (first["total"], first["limit"], first["offset"], first["has_more"]) == (5, 2, 0, True)
    assert [c["id"] for c in last["campaigns"]] == [made[0]]
    assert (last["total"], last["has_more"]) == (5, False)
    assert (past["campaigns"], past["total"], past["has_more"]) == ([], 5, False)
