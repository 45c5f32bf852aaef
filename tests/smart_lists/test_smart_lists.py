"""Smart lists: contacts carrying any of a set of tags."""

from __future__ import annotations

import uuid

from tests.factories import add_contact
from tests.helpers import error_code

SMART_LISTS = "/webhooks/inbound/smart-lists"


async def test_create_is_201_with_normalised_tags_and_a_live_count(client, tenant):
    await add_contact(client, tenant, tags=["vip"])
    await add_contact(client, tenant, tags=["lead"])
    await add_contact(client, tenant, tags=["other"])
    response = await client.post(
        SMART_LISTS, json={"name": " Hot ", "tags": [" VIP", "lead", "vip"]}, headers=tenant.headers
    )
    assert response.status_code == 201
    smart_list = (await response.get_json())["smart_list"]
    assert (smart_list["name"], smart_list["tags"], smart_list["contact_count"]) == (
        "Hot",
        ["vip", "lead"],
        2,
    )


async def test_create_without_tags_is_400_tags_required(client, tenant):
    for body in ({"name": "x"}, {"name": "x", "tags": []}, {"name": "x", "tags": [" "]}):
        response = await client.post(SMART_LISTS, json=body, headers=tenant.headers)
        assert response.status_code == 400, body
        assert await error_code(response) == "tags_required"


async def test_create_without_name_is_400(client, tenant):
    response = await client.post(SMART_LISTS, json={"tags": ["a"]}, headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_get_and_list(client, tenant):
    response = await client.post(
        SMART_LISTS, json={"name": "a", "tags": ["a"]}, headers=tenant.headers
    )
    created = (await response.get_json())["smart_list"]
    response = await client.get(f"{SMART_LISTS}/{created['id']}", headers=tenant.headers)
    assert response.status_code == 200
    assert (await response.get_json())["smart_list"]["id"] == created["id"]
    body = await (await client.get(f"{SMART_LISTS}?limit=1", headers=tenant.headers)).get_json()
    assert (body["total"], body["limit"], body["has_more"]) == (1, 1, False)
    response = await client.get(f"{SMART_LISTS}?limit=101", headers=tenant.headers)
    assert response.status_code == 400


async def test_get_unknown_is_404_and_not_uuid_is_400(client, tenant):
    response = await client.get(f"{SMART_LISTS}/{uuid.uuid4()}", headers=tenant.headers)
    assert response.status_code == 404
    response = await client.get(f"{SMART_LISTS}/zz", headers=tenant.headers)
    assert response.status_code == 400


async def test_get_smart_list_of_another_sub_account_is_404(client, tenant, tenant_second):
    response = await client.post(
        SMART_LISTS, json={"name": "a", "tags": ["a"]}, headers=tenant_second.headers
    )
    foreign = (await response.get_json())["smart_list"]["id"]
    response = await client.get(f"{SMART_LISTS}/{foreign}", headers=tenant.headers)
    assert response.status_code == 404


async def test_without_key_is_401(client):
    response = await client.post(SMART_LISTS, json={"name": "a", "tags": ["a"]})
    assert response.status_code == 401
