"""POST /contacts: create, or match by email then phone and update (SPEC, CONTRACT 3 and 5)."""

from __future__ import annotations

from tests.factories import CONTACTS, create_contact, unique_email, unique_phone
from tests.helpers import error_code, get_contact


async def post(client, tenant, body=None, **kwargs):
    if body is None and not kwargs:
        return await client.post(CONTACTS, headers=tenant.headers)
    return await client.post(CONTACTS, json=body, headers=tenant.headers, **kwargs)


async def test_create_is_201_with_created_true_and_contact_id(client, tenant):
    response = await post(client, tenant, {"email": unique_email()})
    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success" and body["created"] is True
    assert (await get_contact(client, tenant, body["contact_id"]))["id"] == body["contact_id"]


async def test_create_stores_every_given_field(client, tenant):
    email, phone = unique_email(), unique_phone()
    contact_id = await create_contact(
        client,
        tenant,
        first_name="Ada",
        last_name="Lovelace",
        email=email,
        phone=phone,
        address="1 Analytical Way",
        source="website",
    )
    contact = await get_contact(client, tenant, contact_id)
    assert contact["name"] == "Ada Lovelace"
    assert (contact["first_name"], contact["last_name"]) == ("Ada", "Lovelace")
    assert (contact["email"], contact["phone"]) == (email, phone)
    assert contact["address"] == "1 Analytical Way"
    assert contact["lead_source"] == "website"
    assert contact["tags"] == []
    assert contact["custom_field_values"] == {}
    assert contact["company_id"] is None and contact["assigned_user_id"] is None
    assert contact["status"] is None
    assert contact["created_at"].endswith("Z") and len(contact["created_at"]) == 24


async def test_email_is_stored_lowercased(client, tenant):
    email = unique_email()
    contact_id = await create_contact(client, tenant, email=email.upper())
    assert (await get_contact(client, tenant, contact_id))["email"] == email


async def test_given_name_is_kept(client, tenant):
    contact_id = await create_contact(
        client, tenant, name="  Grace H.  ", first_name="Grace", last_name="Hopper"
    )
    assert (await get_contact(client, tenant, contact_id))["name"] == "Grace H."


async def test_name_from_first_name_alone(client, tenant):
    contact_id = await create_contact(client, tenant, first_name=" Ada ")
    assert (await get_contact(client, tenant, contact_id))["name"] == "Ada"


async def test_name_from_last_name_alone(client, tenant):
    contact_id = await create_contact(client, tenant, last_name="Lovelace")
    assert (await get_contact(client, tenant, contact_id))["name"] == "Lovelace"


async def test_name_falls_back_to_email(client, tenant):
    email = unique_email()
    contact_id = await create_contact(client, tenant, email=email, phone=unique_phone())
    assert (await get_contact(client, tenant, contact_id))["name"] == email


async def test_blank_name_is_derived(client, tenant):
    email = unique_email()
    contact_id = await create_contact(client, tenant, name="   ", first_name="  ", email=email)
    assert (await get_contact(client, tenant, contact_id))["name"] == email


async def test_name_falls_back_to_phone(client, tenant):
    phone = unique_phone()
    contact_id = await create_contact(client, tenant, phone=phone)
    assert (await get_contact(client, tenant, contact_id))["name"] == phone


async def test_source_defaults_to_inbound_webhook(client, tenant):
    contact_id = await create_contact(client, tenant)
    assert (await get_contact(client, tenant, contact_id))["lead_source"] == "inbound_webhook"


async def test_tags_on_create_are_ignored(client, tenant):
    contact_id = await create_contact(client, tenant, tags=["VIP", "lead"])
    assert (await get_contact(client, tenant, contact_id))["tags"] == []


async def test_phone_not_e164_is_dropped_on_create(client, tenant):
    email = unique_email()
    contact_id = await create_contact(client, tenant, email=email, phone="415-555-0100")
    contact = await get_contact(client, tenant, contact_id)
    assert contact["phone"] is None and contact["email"] == email


async def test_phone_e164_shape_but_not_a_real_number_is_dropped(client, tenant):
    contact_id = await create_contact(client, tenant, email=unique_email(), phone="+15555550100")
    assert (await get_contact(client, tenant, contact_id))["phone"] is None


async def test_invalid_email_is_dropped_on_create(client, tenant):
    phone = unique_phone()
    contact_id = await create_contact(client, tenant, email="not-an-email", phone=phone)
    contact = await get_contact(client, tenant, contact_id)
    assert contact["email"] is None and contact["phone"] == phone


async def test_no_body_is_400_email_or_phone_required(client, tenant):
    response = await post(client, tenant)
    assert response.status_code == 400
    assert await error_code(response) == "contacts_email_or_phone_required"


async def test_empty_json_body_is_400_email_or_phone_required(client, tenant):
    for raw in ("", "null", "{}"):
        response = await client.post(
            CONTACTS, data=raw, headers={**tenant.headers, "content-type": "application/json"}
        )
        assert response.status_code == 400, raw
        assert await error_code(response) == "contacts_email_or_phone_required"


async def test_only_unusable_email_and_phone_is_400(client, tenant):
    response = await post(client, tenant, {"email": "nope@", "phone": "12345", "name": "X"})
    assert response.status_code == 400
    assert await error_code(response) == "contacts_email_or_phone_required"


async def test_match_by_email_case_insensitive_is_200_and_updates(client, tenant):
    email = unique_email()
    contact_id = await create_contact(client, tenant, email=email, first_name="Old")
    response = await post(
        client, tenant, {"email": email.upper(), "first_name": "New", "address": "2 Main St"}
    )
    assert response.status_code == 200
    body = await response.get_json()
    assert body == {"status": "success", "created": False, "contact_id": contact_id}
    contact = await get_contact(client, tenant, contact_id)
    assert (contact["first_name"], contact["name"], contact["address"]) == (
        "New",
        "New",
        "2 Main St",
    )


async def test_match_by_phone_when_email_unknown(client, tenant):
    phone = unique_phone()
    contact_id = await create_contact(client, tenant, phone=phone)
    new_email = unique_email()
    response = await post(client, tenant, {"email": new_email, "phone": phone})
    assert response.status_code == 200
    assert (await response.get_json())["contact_id"] == contact_id
    assert (await get_contact(client, tenant, contact_id))["email"] == new_email


async def test_email_match_wins_over_phone_match(client, tenant):
    email, phone = unique_email(), unique_phone()
    by_email = await create_contact(client, tenant, email=email)
    await create_contact(client, tenant, phone=phone)
    response = await post(client, tenant, {"email": email, "first_name": "Z"})
    assert (await response.get_json())["contact_id"] == by_email


async def test_match_taking_a_phone_another_contact_holds_is_409(client, tenant):
    email, phone = unique_email(), unique_phone()
    matched = await create_contact(client, tenant, email=email)
    await create_contact(client, tenant, phone=phone)
    response = await post(client, tenant, {"email": email, "phone": phone, "first_name": "Q"})
    assert response.status_code == 409
    assert await error_code(response) == "contact_phone_conflict"
    contact = await get_contact(client, tenant, matched)
    assert contact["phone"] is None and contact["first_name"] is None


async def test_source_is_not_applied_on_match(client, tenant):
    email = unique_email()
    contact_id = await create_contact(client, tenant, email=email, source="website")
    await post(client, tenant, {"email": email, "source": "facebook"})
    assert (await get_contact(client, tenant, contact_id))["lead_source"] == "website"


async def test_match_keeps_name_when_no_name_parts_given(client, tenant):
    email = unique_email()
    contact_id = await create_contact(client, tenant, email=email, name="Kept Name")
    await post(client, tenant, {"email": email, "address": "Elsewhere"})
    assert (await get_contact(client, tenant, contact_id))["name"] == "Kept Name"


async def test_match_drops_bad_phone_and_keeps_the_stored_one(client, tenant):
    email, phone = unique_email(), unique_phone()
    contact_id = await create_contact(client, tenant, email=email, phone=phone)
    response = await post(client, tenant, {"email": email, "phone": "bogus"})
    assert response.status_code == 200
    assert (await get_contact(client, tenant, contact_id))["phone"] == phone


async def test_body_not_an_object_is_400_validation_error(client, tenant):
    for body in ([1, 2], "text", 5):
        response = await post(client, tenant, body)
        assert response.status_code == 400
        assert await error_code(response) == "validation_error"


async def test_invalid_json_is_400_invalid_json(client, tenant):
    response = await client.post(
        CONTACTS, data="{not json", headers={**tenant.headers, "content-type": "application/json"}
    )
    assert response.status_code == 400
    assert await error_code(response) == "invalid_json"


async def test_wrong_types_are_400_validation_error_with_details(client, tenant):
    for field, value in (
        ("email", 5),
        ("phone", 14155550100),
        ("name", ["a"]),
        ("first_name", True),
        ("address", {}),
        ("source", 1),
        ("custom_field_values", "x"),
        ("company_id", 7),
        ("assigned_user_id", False),
        ("status", 3),
    ):
        response = await post(client, tenant, {"email": unique_email(), field: value})
        assert response.status_code == 400, field
        body = await response.get_json()
        assert body["error"]["code"] == "validation_error", field
        assert body["error"]["details"][0]["field"] == field
    assert (await (await client.get(CONTACTS, headers=tenant.headers)).get_json())["total"] == 0


async def test_too_long_name_is_400(client, tenant):
    response = await post(client, tenant, {"email": unique_email(), "name": "x" * 201})
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_missing_key_is_401(client):
    response = await client.post(CONTACTS, json={"email": unique_email()})
    assert response.status_code == 401
    assert await error_code(response) == "missing_api_key"
