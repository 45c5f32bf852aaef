"""A contact's extended attributes: custom field values, company, assigned user, status
(SPEC Contact, CONTRACT 4, 5)."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import (
    BASE,
    CONTACTS,
    create_company,
    create_contact,
    define_custom_field,
    make_member,
    unique_email,
)
from tests.helpers import error_code, get_contact, tenant_sql

FIELDS = f"{BASE}/custom-fields"
COMPANIES = f"{BASE}/companies"


@pytest.fixture
async def fields(client, tenant):
    await define_custom_field(client, tenant, key="notes_text", field_type="text")
    await define_custom_field(client, tenant, key="score", field_type="number")
    await define_custom_field(client, tenant, key="opted_in", field_type="boolean")
    await define_custom_field(client, tenant, key="birthday", field_type="date")
    await define_custom_field(
        client, tenant, key="tier", field_type="select", options=["gold", "silver"]
    )
    await define_custom_field(
        client,
        tenant,
        key="topics",
        field_type="multi_select",
        options=["sales", "support", "billing"],
    )
    await define_custom_field(client, tenant, key="crm_id", field_type="text", read_only=True)


# --- custom field values -----------------------------------------------------------------------


async def test_values_of_every_type_are_saved_with_the_contact(client, tenant, fields):
    values = {
        "notes_text": "hi",
        "score": 4.5,
        "opted_in": False,
        "birthday": "1990-02-28",
        "tier": "gold",
        "topics": ["sales", "billing"],
    }
    contact_id = await create_contact(client, tenant, custom_field_values=values)
    assert (await get_contact(client, tenant, contact_id))["custom_field_values"] == values


async def test_integer_number_is_a_number(client, tenant, fields):
    contact_id = await create_contact(client, tenant, custom_field_values={"score": 7})
    assert (await get_contact(client, tenant, contact_id))["custom_field_values"] == {"score": 7}


@pytest.mark.parametrize(
    "key, value",
    [
        ("notes_text", 5),
        ("score", "5"),
        ("score", True),
        ("opted_in", "true"),
        ("opted_in", 1),
        ("birthday", "1990-2-28"),
        ("birthday", "1990-02-30"),
        ("birthday", "28/02/1990"),
        ("birthday", 19900228),
        ("tier", "bronze"),
        ("tier", ["gold"]),
        ("topics", "sales"),
        ("topics", ["sales", "marketing"]),
        ("topics", [1]),
    ],
)
async def test_value_of_the_wrong_type_is_400_on_create(client, tenant, fields, key, value):
    response = await client.post(
        CONTACTS,
        json={"email": unique_email(), "custom_field_values": {key: value}},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"]["code"] == "validation_error"
    assert body["error"]["details"][0]["field"] == f"custom_field_values.{key}"
    total = (await (await client.get(CONTACTS, headers=tenant.headers)).get_json())["total"]
    assert total == 0


async def test_unknown_key_is_400(client, tenant, fields):
    response = await client.post(
        CONTACTS,
        json={"email": unique_email(), "custom_field_values": {"nope": "x"}},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_inactive_key_is_400(client, tenant, fields, pool):
    await tenant_sql(pool, tenant, "UPDATE custom_fields SET is_active = false WHERE key = 'tier'")
    response = await client.post(
        CONTACTS,
        json={"email": unique_email(), "custom_field_values": {"tier": "gold"}},
        headers=tenant.headers,
    )
    assert response.status_code == 400


async def test_read_only_field_is_400(client, tenant, fields):
    contact_id = await create_contact(client, tenant)
    response = await client.patch(
        f"{CONTACTS}/{contact_id}",
        json={"custom_field_values": {"crm_id": "123"}},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"]["details"][0]["type"] == "read_only"


async def test_patch_values_merge_and_null_clears_a_key(client, tenant, fields):
    contact_id = await create_contact(
        client, tenant, custom_field_values={"tier": "gold", "score": 1}
    )
    response = await client.patch(
        f"{CONTACTS}/{contact_id}",
        json={"custom_field_values": {"score": 2, "tier": None, "opted_in": True}},
        headers=tenant.headers,
    )
    assert response.status_code == 200
    assert (await get_contact(client, tenant, contact_id))["custom_field_values"] == {
        "score": 2,
        "opted_in": True,
    }


async def test_bad_value_on_patch_changes_nothing(client, tenant, fields):
    contact_id = await create_contact(client, tenant, custom_field_values={"score": 1})
    response = await client.patch(
        f"{CONTACTS}/{contact_id}",
        json={"address": "x", "custom_field_values": {"score": "2"}},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    contact = await get_contact(client, tenant, contact_id)
    assert contact["custom_field_values"] == {"score": 1} and contact["address"] is None


async def test_values_not_an_object_is_400(client, tenant, fields):
    contact_id = await create_contact(client, tenant)
    for value in (None, [], "x"):
        response = await client.patch(
            f"{CONTACTS}/{contact_id}", json={"custom_field_values": value}, headers=tenant.headers
        )
        assert response.status_code == 400, value


async def test_match_on_create_merges_values(client, tenant, fields):
    email = unique_email()
    contact_id = await create_contact(
        client, tenant, email=email, custom_field_values={"tier": "gold"}
    )
    await client.post(
        CONTACTS, json={"email": email, "custom_field_values": {"score": 3}}, headers=tenant.headers
    )
    assert (await get_contact(client, tenant, contact_id))["custom_field_values"] == {
        "tier": "gold",
        "score": 3,
    }


# --- a contact's company ----------------------------------------------------------------------


async def test_company_id_links_and_null_clears(client, tenant):
    acme = await create_company(client, tenant)
    contact_id = await create_contact(client, tenant, company_id=acme["id"])
    assert (await get_contact(client, tenant, contact_id))["company_id"] == acme["id"]
    await client.patch(
        f"{CONTACTS}/{contact_id}", json={"company_id": None}, headers=tenant.headers
    )
    assert (await get_contact(client, tenant, contact_id))["company_id"] is None


async def test_unknown_company_id_is_400(client, tenant):
    response = await client.post(
        CONTACTS,
        json={"email": unique_email(), "company_id": str(uuid.uuid4())},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"]["code"] == "validation_error"
    assert body["error"]["details"][0]["field"] == "company_id"


async def test_company_id_not_a_uuid_is_400(client, tenant):
    response = await client.post(
        CONTACTS, json={"email": unique_email(), "company_id": "acme"}, headers=tenant.headers
    )
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_company_of_another_sub_account_is_400(client, tenant, tenant_second):
    theirs = await create_company(client, tenant_second)
    contact_id = await create_contact(client, tenant)
    response = await client.patch(
        f"{CONTACTS}/{contact_id}", json={"company_id": theirs["id"]}, headers=tenant.headers
    )
    assert response.status_code == 400
    assert (await get_contact(client, tenant, contact_id))["company_id"] is None


# --- assigned user -----------------------------------------------------------------------------


async def test_assigned_user_must_be_an_active_member(client, tenant, member):
    contact_id = await create_contact(client, tenant, assigned_user_id=str(member))
    assert (await get_contact(client, tenant, contact_id))["assigned_user_id"] == str(member)
    await client.patch(
        f"{CONTACTS}/{contact_id}", json={"assigned_user_id": None}, headers=tenant.headers
    )
    assert (await get_contact(client, tenant, contact_id))["assigned_user_id"] is None


async def test_inactive_member_is_400(client, tenant, member, pool):
    await pool.execute(
        "UPDATE control.memberships SET is_active = false WHERE user_id = $1", member
    )
    response = await client.post(
        CONTACTS,
        json={"email": unique_email(), "assigned_user_id": str(member)},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"]["details"][0]["field"] == "assigned_user_id"


async def test_member_of_another_sub_account_is_400(client, mailbox, tenant, tenant_second):
    stranger = await make_member(client, mailbox, tenant_second)
    response = await client.post(
        CONTACTS,
        json={"email": unique_email(), "assigned_user_id": str(stranger)},
        headers=tenant.headers,
    )
    assert response.status_code == 400


async def test_unknown_or_malformed_user_is_400(client, tenant):
    for value, code in ((str(uuid.uuid4()), "validation_error"), ("bob", "invalid_uuid")):
        response = await client.post(
            CONTACTS,
            json={"email": unique_email(), "assigned_user_id": value},
            headers=tenant.headers,
        )
        assert response.status_code == 400
        assert await error_code(response) == code


# --- status ------------------------------------------------------------------------------------


async def test_status_is_saved(client, tenant):
    contact_id = await create_contact(client, tenant, status="Qualified")
    assert (await get_contact(client, tenant, contact_id))["status"] == "Qualified"
    await client.patch(
        f"{CONTACTS}/{contact_id}", json={"status": "x" * 100}, headers=tenant.headers
    )
    assert (await get_contact(client, tenant, contact_id))["status"] == "x" * 100


@pytest.mark.parametrize("status", ["", "   ", "x" * 101, None, 5])
async def test_invalid_status_is_400(client, tenant, status):
    response = await client.post(
        CONTACTS, json={"email": unique_email(), "status": status}, headers=tenant.headers
    )
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"
    contact_id = await create_contact(client, tenant)
    response = await client.patch(
        f"{CONTACTS}/{contact_id}", json={"status": status}, headers=tenant.headers
    )
    assert response.status_code == 400
