"""PATCH /contacts/{id}: only the fields present, stricter than create (SPEC Contacts)."""

from __future__ import annotations

import uuid

from tests.factories import CONTACTS, create_contact, unique_email, unique_phone
from tests.helpers import error_code, get_contact


async def patch(client, tenant, contact_id, body=None, **kwargs):
    if body is None:
        return await client.patch(f"{CONTACTS}/{contact_id}", headers=tenant.headers, **kwargs)
    return await client.patch(f"{CONTACTS}/{contact_id}", json=body, headers=tenant.headers)


async def test_patch_is_200_updated_true(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await patch(client, tenant, contact_id, {"address": "3 High St"})
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "updated": True,
        "contact_id": contact_id,
    }
    assert (await get_contact(client, tenant, contact_id))["address"] == "3 High St"


async def test_patch_changes_only_fields_present(client, tenant):
    email, phone = unique_email(), unique_phone()
    contact_id = await create_contact(
        client,
        tenant,
        first_name="Ada",
        last_name="L",
        email=email,
        phone=phone,
        address="A",
        source="web",
    )
    before = await get_contact(client, tenant, contact_id)
    await patch(client, tenant, contact_id, {"address": "B"})
    after = await get_contact(client, tenant, contact_id)
    assert after["address"] == "B"
    for key in (
        "name",
        "first_name",
        "last_name",
        "email",
        "phone",
        "lead_source",
        "tags",
        "created_at",
    ):
        assert after[key] == before[key], key
    assert after["updated_at"] > before["updated_at"]


async def test_patch_name_rebuilt_from_first_and_last(client, tenant):
    contact_id = await create_contact(client, tenant, first_name="Ada", last_name="Byron")
    await patch(client, tenant, contact_id, {"last_name": "Lovelace"})
    assert (await get_contact(client, tenant, contact_id))["name"] == "Ada Lovelace"


async def test_patch_given_name_wins_over_parts(client, tenant):
    contact_id = await create_contact(client, tenant, first_name="Ada")
    await patch(client, tenant, contact_id, {"name": "Countess", "first_name": "Augusta"})
    contact = await get_contact(client, tenant, contact_id)
    assert (contact["name"], contact["first_name"]) == ("Countess", "Augusta")


async def test_patch_name_untouched_when_no_name_fields_given(client, tenant):
    contact_id = await create_contact(client, tenant, name="Custom", first_name="Ada")
    await patch(client, tenant, contact_id, {"email": unique_email()})
    assert (await get_contact(client, tenant, contact_id))["name"] == "Custom"


async def test_patch_email_lowercased(client, tenant):
    contact_id = await create_contact(client, tenant)
    email = unique_email()
    await patch(client, tenant, contact_id, {"email": email.upper()})
    assert (await get_contact(client, tenant, contact_id))["email"] == email


async def test_patch_phone_not_e164_is_400(client, tenant):
    phone = unique_phone()
    contact_id = await create_contact(client, tenant, phone=phone)
    for bad in ("415-555-0100", "+15555550100", "", "+0123"):
        response = await patch(client, tenant, contact_id, {"phone": bad, "address": "x"})
        assert response.status_code == 400, bad
        body = await response.get_json()
        assert body["error"]["code"] == "validation_error"
        assert body["error"]["details"][0]["field"] == "phone"
    contact = await get_contact(client, tenant, contact_id)
    assert contact["phone"] == phone and contact["address"] is None


async def test_patch_invalid_email_is_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await patch(client, tenant, contact_id, {"email": "no-at-sign"})
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_patch_tags_replace_the_set_normalised(client, tenant):
    contact_id = await create_contact(client, tenant)
    await patch(client, tenant, contact_id, {"tags": ["old"]})
    await patch(client, tenant, contact_id, {"tags": [" VIP ", "vip", "Lead", "", "  "]})
    assert (await get_contact(client, tenant, contact_id))["tags"] == ["vip", "lead"]


async def test_patch_empty_tags_clears_the_set(client, tenant):
    contact_id = await create_contact(client, tenant)
    await patch(client, tenant, contact_id, {"tags": ["a", "b"]})
    await patch(client, tenant, contact_id, {"tags": []})
    assert (await get_contact(client, tenant, contact_id))["tags"] == []


async def test_patch_tags_not_strings_is_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    for bad in ("vip", [1], None, {"a": 1}):
        response = await patch(client, tenant, contact_id, {"tags": bad})
        assert response.status_code == 400, bad
        assert await error_code(response) == "validation_error"


async def test_patch_source_is_applied(client, tenant):
    contact_id = await create_contact(client, tenant)
    await patch(client, tenant, contact_id, {"source": "referral"})
    assert (await get_contact(client, tenant, contact_id))["lead_source"] == "referral"


async def test_patch_blank_source_is_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await patch(client, tenant, contact_id, {"source": "  "})
    assert response.status_code == 400


async def test_patch_null_clears_optional_text(client, tenant):
    contact_id = await create_contact(
        client, tenant, address="Somewhere", phone=unique_phone(), email=unique_email()
    )
    response = await patch(client, tenant, contact_id, {"address": None, "phone": None})
    assert response.status_code == 200
    contact = await get_contact(client, tenant, contact_id)
    assert contact["address"] is None and contact["phone"] is None


async def test_patch_removing_both_email_and_phone_is_400(client, tenant):
    contact_id = await create_contact(client, tenant, email=unique_email())
    response = await patch(client, tenant, contact_id, {"email": None})
    assert response.status_code == 400
    assert await error_code(response) == "contacts_email_or_phone_required"


async def test_patch_nothing_to_update_is_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    for body in ({}, {"unknown": 1}, {"id": str(uuid.uuid4())}):
        response = await patch(client, tenant, contact_id, body)
        assert response.status_code == 400, body
        assert await error_code(response) == "nothing_to_update"


async def test_patch_without_body_is_400_nothing_to_update(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await patch(client, tenant, contact_id)
    assert response.status_code == 400
    assert await error_code(response) == "nothing_to_update"


async def test_patch_phone_held_by_another_contact_is_409(client, tenant):
    phone = unique_phone()
    await create_contact(client, tenant, phone=phone)
    other = await create_contact(client, tenant)
    response = await patch(client, tenant, other, {"phone": phone, "address": "x"})
    assert response.status_code == 409
    assert await error_code(response) == "contact_phone_conflict"
    assert (await get_contact(client, tenant, other))["address"] is None


async def test_patch_email_held_by_another_contact_is_409(client, tenant):
    email = unique_email()
    await create_contact(client, tenant, email=email)
    other = await create_contact(client, tenant)
    response = await patch(client, tenant, other, {"email": email.upper()})
    assert response.status_code == 409
    assert await error_code(response) == "contact_email_conflict"


async def test_patch_own_phone_again_is_fine(client, tenant):
    phone = unique_phone()
    contact_id = await create_contact(client, tenant, phone=phone)
    assert (await patch(client, tenant, contact_id, {"phone": phone})).status_code == 200


async def test_patch_non_uuid_is_400(client, tenant):
    response = await patch(client, tenant, "1234", {"address": "x"})
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_patch_unknown_is_404(client, tenant):
    response = await patch(client, tenant, uuid.uuid4(), {"address": "x"})
    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_patch_wrong_types_are_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    for body in ({"name": 1}, {"phone": 1}, {"status": ["x"]}, [1], "x"):
        response = await patch(client, tenant, contact_id, body)
        assert response.status_code == 400, body
        assert await error_code(response) == "validation_error"


async def test_patch_without_key_is_401(client):
    response = await client.patch(f"{CONTACTS}/{uuid.uuid4()}", json={"address": "x"})
    assert response.status_code == 401
