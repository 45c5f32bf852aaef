"""Notes on a contact: create, list (active, newest first), soft delete (SPEC Notes)."""

from __future__ import annotations

import uuid

from tests.factories import CONTACTS, create_contact
from tests.helpers import error_code


def notes_url(contact_id, note_id=None):
    return f"{CONTACTS}/{contact_id}/notes" + (f"/{note_id}" if note_id else "")


async def add_note(client, tenant, contact_id, content="A note"):
    response = await client.post(
        notes_url(contact_id), json={"content": content}, headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["note"]


async def list_notes(client, tenant, contact_id):
    response = await client.get(notes_url(contact_id), headers=tenant.headers)
    assert response.status_code == 200
    return await response.get_json()


async def test_create_is_201_with_the_note(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await client.post(
        notes_url(contact_id), json={"content": "Called, no answer"}, headers=tenant.headers
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success"
    assert set(body["note"]) == {"id", "contact_id", "content", "created_at"}
    assert body["note"]["contact_id"] == contact_id
    assert body["note"]["content"] == "Called, no answer"


async def test_content_is_stored_as_sent(client, tenant):
    contact_id = await create_contact(client, tenant)
    content = "  Line one\n\tLine two  "
    assert (await add_note(client, tenant, contact_id, content))["content"] == content
    assert (await list_notes(client, tenant, contact_id))["notes"][0]["content"] == content


async def test_content_of_exactly_1_and_5000_characters_is_accepted(client, tenant):
    contact_id = await create_contact(client, tenant)
    await add_note(client, tenant, contact_id, "x")
    await add_note(client, tenant, contact_id, "é" * 5000)


async def test_invalid_content_is_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    for body in (
        {},
        {"content": ""},
        {"content": "   \n\t"},
        {"content": "x" * 5001},
        {"content": 5},
        {"content": None},
        [1],
        "text",
    ):
        response = await client.post(notes_url(contact_id), json=body, headers=tenant.headers)
        assert response.status_code == 400, body
        assert await error_code(response) == "validation_error"
    assert (await list_notes(client, tenant, contact_id))["note_count"] == 0


async def test_create_without_body_is_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await client.post(notes_url(contact_id), headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_create_non_uuid_is_400(client, tenant):
    response = await client.post(notes_url("x"), json={"content": "a"}, headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_create_on_unknown_contact_is_404(client, tenant):
    response = await client.post(
        notes_url(uuid.uuid4()), json={"content": "a"}, headers=tenant.headers
    )
    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_create_without_key_is_401(client):
    response = await client.post(notes_url(uuid.uuid4()), json={"content": "a"})
    assert response.status_code == 401


async def test_list_is_newest_first_with_agent_id_and_updated_at(client, tenant):
    contact_id = await create_contact(client, tenant)
    first = await add_note(client, tenant, contact_id, "first")
    second = await add_note(client, tenant, contact_id, "second")
    body = await list_notes(client, tenant, contact_id)
    assert (body["status"], body["contact_id"], body["note_count"]) == ("success", contact_id, 2)
    assert [n["id"] for n in body["notes"]] == [second["id"], first["id"]]
    note = body["notes"][0]
    assert set(note) == {"id", "contact_id", "content", "agent_id", "created_at", "updated_at"}
    assert note["agent_id"] is None


async def test_list_of_contact_without_notes_is_empty(client, tenant):
    contact_id = await create_contact(client, tenant)
    body = await list_notes(client, tenant, contact_id)
    assert (body["note_count"], body["notes"]) == (0, [])


async def test_list_shows_only_the_contacts_own_notes(client, tenant):
    mine, other = await create_contact(client, tenant), await create_contact(client, tenant)
    await add_note(client, tenant, other, "not mine")
    assert (await list_notes(client, tenant, mine))["note_count"] == 0


async def test_list_non_uuid_is_400(client, tenant):
    response = await client.get(notes_url("1"), headers=tenant.headers)
    assert response.status_code == 400


async def test_list_unknown_contact_is_404(client, tenant):
    response = await client.get(notes_url(uuid.uuid4()), headers=tenant.headers)
    assert response.status_code == 404


async def test_list_without_key_is_401(client):
    assert (await client.get(notes_url(uuid.uuid4()))).status_code == 401


async def test_delete_soft_deletes_and_hides_the_note(client, tenant):
    contact_id = await create_contact(client, tenant)
    kept = await add_note(client, tenant, contact_id, "kept")
    gone = await add_note(client, tenant, contact_id, "gone")
    response = await client.delete(notes_url(contact_id, gone["id"]), headers=tenant.headers)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "deleted": True,
        "contact_id": contact_id,
        "note_id": gone["id"],
    }
    body = await list_notes(client, tenant, contact_id)
    assert [n["id"] for n in body["notes"]] == [kept["id"]] and body["note_count"] == 1


async def test_delete_already_deleted_is_404(client, tenant):
    contact_id = await create_contact(client, tenant)
    note = await add_note(client, tenant, contact_id)
    await client.delete(notes_url(contact_id, note["id"]), headers=tenant.headers)
    response = await client.delete(notes_url(contact_id, note["id"]), headers=tenant.headers)
    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_delete_note_of_another_contact_is_404_and_keeps_it(client, tenant):
    owner, other = await create_contact(client, tenant), await create_contact(client, tenant)
    note = await add_note(client, tenant, owner)
    response = await client.delete(notes_url(other, note["id"]), headers=tenant.headers)
    assert response.status_code == 404
    assert (await list_notes(client, tenant, owner))["note_count"] == 1


async def test_delete_unknown_note_or_contact_is_404(client, tenant):
    contact_id = await create_contact(client, tenant)
    for url in (notes_url(contact_id, uuid.uuid4()), notes_url(uuid.uuid4(), uuid.uuid4())):
        response = await client.delete(url, headers=tenant.headers)
        assert response.status_code == 404


async def test_delete_non_uuid_ids_are_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    for url in (notes_url(contact_id, "nope"), notes_url("nope", uuid.uuid4())):
        response = await client.delete(url, headers=tenant.headers)
        assert response.status_code == 400
        assert await error_code(response) == "invalid_uuid"


async def test_delete_without_key_is_401(client):
    assert (await client.delete(notes_url(uuid.uuid4(), uuid.uuid4()))).status_code == 401
