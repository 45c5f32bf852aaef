"""GET /contacts (its own paging rule, has_more arithmetic) and GET /contacts/{id}."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import CONTACTS, create_contact
from tests.helpers import error_code


async def page(client, tenant, query=""):
    response = await client.get(f"{CONTACTS}{query}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


@pytest.fixture
async def three(client, tenant):
    """Three contacts, oldest first."""
    return [await create_contact(client, tenant) for _ in range(3)]


async def test_list_is_newest_first_with_totals(client, tenant, three):
    body = await page(client, tenant)
    assert body["status"] == "success"
    assert [c["id"] for c in body["contacts"]] == list(reversed(three))
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (3, 50, 0, False)


async def test_list_empty(client, tenant):
    body = await page(client, tenant)
    assert (body["total"], body["contacts"], body["has_more"]) == (0, [], False)


async def test_has_more_true_when_offset_plus_returned_below_total(client, tenant, three):
    body = await page(client, tenant, "?limit=2&offset=0")
    assert len(body["contacts"]) == 2 and body["has_more"] is True


async def test_has_more_false_when_offset_plus_returned_equals_total(client, tenant, three):
    body = await page(client, tenant, "?limit=2&offset=1")
    assert len(body["contacts"]) == 2 and body["has_more"] is False
    body = await page(client, tenant, "?limit=3&offset=0")
    assert len(body["contacts"]) == 3 and body["has_more"] is False


async def test_has_more_false_on_the_last_partial_page(client, tenant, three):
    body = await page(client, tenant, "?limit=2&offset=2")
    assert [c["id"] for c in body["contacts"]] == [three[0]] and body["has_more"] is False


async def test_offset_past_the_end_is_an_empty_page(client, tenant, three):
    body = await page(client, tenant, "?limit=2&offset=3")
    assert body["contacts"] == [] and body["has_more"] is False and body["total"] == 3
    body = await page(client, tenant, "?offset=10")
    assert body["contacts"] == [] and body["has_more"] is False


async def test_full_walk_visits_every_contact_once(client, tenant, three):
    seen, offset = [], 0
    while True:
        body = await page(client, tenant, f"?limit=1&offset={offset}")
        seen += [c["id"] for c in body["contacts"]]
        if not body["has_more"]:
            break
        offset += 1
    assert seen == list(reversed(three))


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", 50),
        ("?limit=1", 1),
        ("?limit=100", 100),
        ("?limit=101", 100),
        ("?limit=5000", 100),
        ("?limit=0", 50),
        ("?limit=-3", 50),
        ("?limit=abc", 50),
        ("?limit=", 50),
        ("?limit=2.5", 50),
    ],
)
async def test_limit_rule(client, tenant, query, expected):
    assert (await page(client, tenant, query))["limit"] == expected


@pytest.mark.parametrize("offset", ["-1", "abc", "1.5"])
async def test_bad_offset_is_400(client, tenant, offset):
    response = await client.get(f"{CONTACTS}?offset={offset}", headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_list_without_key_is_401(client):
    assert (await client.get(CONTACTS)).status_code == 401


async def test_get_returns_the_contact(client, tenant):
    contact_id = await create_contact(client, tenant, first_name="Ada")
    response = await client.get(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success"
    assert set(body["contact"]) == {
        "id",
        "name",
        "first_name",
        "last_name",
        "email",
        "phone",
        "address",
        "tags",
        "lead_source",
        "custom_field_values",
        "company_id",
        "assigned_user_id",
        "status",
        "created_at",
        "updated_at",
    }


async def test_get_non_uuid_is_400_invalid_uuid(client, tenant):
    response = await client.get(f"{CONTACTS}/not-a-uuid", headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_get_unknown_is_404(client, tenant):
    response = await client.get(f"{CONTACTS}/{uuid.uuid4()}", headers=tenant.headers)
    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_get_without_key_is_401(client):
    assert (await client.get(f"{CONTACTS}/{uuid.uuid4()}")).status_code == 401
