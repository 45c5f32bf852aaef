"""Companies: create and list (SPEC Companies, CONTRACT 4)."""

from __future__ import annotations

from tests.factories import BASE, create_company
from tests.helpers import error_code

COMPANIES = f"{BASE}/companies"


# --- companies ---------------------------------------------------------------------------------


async def test_create_company_is_201(client, tenant):
    response = await client.post(COMPANIES, json={"name": " Acme Ltd "}, headers=tenant.headers)
    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success" and body["company"]["name"] == "Acme Ltd"
    assert set(body["company"]) == {"id", "name", "created_at", "updated_at"}


async def test_list_companies_newest_first(client, tenant):
    first = await create_company(client, tenant, "One")
    second = await create_company(client, tenant, "Two")
    body = await (await client.get(COMPANIES, headers=tenant.headers)).get_json()
    assert [c["id"] for c in body["companies"]] == [second["id"], first["id"]]
    assert (body["total"], body["has_more"]) == (2, False)


async def test_invalid_company_is_400(client, tenant):
    for body in ({}, {"name": ""}, {"name": "  "}, {"name": 1}, {"name": "x" * 201}, [1]):
        response = await client.post(COMPANIES, json=body, headers=tenant.headers)
        assert response.status_code == 400, body
        assert await error_code(response) == "validation_error"


async def test_companies_without_key_are_401(client):
    assert (await client.get(COMPANIES)).status_code == 401
