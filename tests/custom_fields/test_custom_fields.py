"""Custom field definitions: create, list, duplicates, validation (SPEC Custom fields,
CONTRACT 4)."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import BASE, define_custom_field
from tests.helpers import error_code

FIELDS = f"{BASE}/custom-fields"


# --- custom field definitions ------------------------------------------------------------------


async def test_create_custom_field_is_201(client, tenant):
    response = await client.post(
        FIELDS,
        json={"key": "tier", "name": "Tier", "field_type": "select", "options": ["gold", "silver"]},
        headers=tenant.headers,
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success"
    field = body["custom_field"]
    assert (
        field["key"],
        field["name"],
        field["field_type"],
        field["options"],
        field["read_only"],
        field["is_active"],
    ) == ("tier", "Tier", "select", ["gold", "silver"], False, True)
    uuid.UUID(field["id"])


async def test_list_custom_fields_paginates(client, tenant):
    for key in ("a_one", "a_two", "a_three"):
        await define_custom_field(client, tenant, key=key, field_type="text")
    response = await client.get(f"{FIELDS}?limit=2", headers=tenant.headers)
    body = await response.get_json()
    assert [f["key"] for f in body["custom_fields"]] == ["a_three", "a_two"]
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (3, 2, 0, True)
    response = await client.get(f"{FIELDS}?limit=101", headers=tenant.headers)
    assert response.status_code == 400


async def test_duplicate_custom_field_key_is_409(client, tenant):
    await define_custom_field(client, tenant, key="tier", field_type="text")
    response = await client.post(
        FIELDS, json={"key": "tier", "name": "T", "field_type": "text"}, headers=tenant.headers
    )
    assert response.status_code == 409
    assert await error_code(response) == "custom_field_key_taken"


@pytest.mark.parametrize(
    "body",
    [
        {"key": "Bad Key", "name": "x", "field_type": "text"},
        {"key": "ok", "name": "  ", "field_type": "text"},
        {"key": "ok", "name": "x", "field_type": "colour"},
        {"key": "ok", "name": "x", "field_type": "select"},
        {"key": "ok", "name": "x", "field_type": "select", "options": []},
        {"key": "ok", "name": "x", "field_type": "select", "options": ["a", "a"]},
        {"key": "ok", "name": "x", "field_type": "select", "options": ["a", " "]},
        {"key": "ok", "name": "x", "field_type": "text", "options": ["a"]},
        {"key": "ok", "name": "x", "field_type": "text", "read_only": "yes"},
        {"name": "x", "field_type": "text"},
        [1],
    ],
)
async def test_invalid_custom_field_is_400(client, tenant, body):
    response = await client.post(FIELDS, json=body, headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_custom_fields_without_key_are_401(client):
    assert (await client.get(FIELDS)).status_code == 401
    assert (await client.post(FIELDS, json={})).status_code == 401
