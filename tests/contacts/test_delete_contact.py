"""DELETE /contacts/{id}: hard delete, notes go with it, references block it (409)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from tenancy.clock import utcnow
from tests.factories import CONTACTS, book, create_calendar, create_contact, free_slots
from tests.helpers import error_code, tenant_sql


async def test_delete_is_200_and_the_contact_is_gone(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "deleted": True,
        "contact_id": contact_id,
    }
    response = await client.get(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 404


async def test_delete_takes_the_notes_with_it(client, tenant, pool):
    contact_id = await create_contact(client, tenant)
    await client.post(
        f"{CONTACTS}/{contact_id}/notes", json={"content": "hello"}, headers=tenant.headers
    )
    await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    rows = await tenant_sql(pool, tenant, "SELECT count(*) FROM notes")
    assert rows[0][0] == 0


async def test_delete_frees_email_and_phone_for_a_new_contact(client, tenant):
    contact_id = await create_contact(client, tenant, email="again@example.com")
    await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    response = await client.post(
        CONTACTS, json={"email": "again@example.com"}, headers=tenant.headers
    )
    assert response.status_code == 201


async def booked_appointment(client, tenant, contact_id):
    calendar = await create_calendar(client, tenant)
    day = (utcnow() + timedelta(days=2)).date().isoformat()
    slot = (await free_slots(client, tenant, calendar["id"], day))[0]
    return await book(client, tenant, calendar["id"], contact_id, slot["start"])


async def test_delete_while_referenced_is_409_and_keeps_the_contact(client, tenant):
    contact_id = await create_contact(client, tenant)
    await booked_appointment(client, tenant, contact_id)
    response = await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 409
    assert await error_code(response) == "contact_referenced"
    assert (await client.get(f"{CONTACTS}/{contact_id}", headers=tenant.headers)).status_code == 200


async def test_delete_once_the_reference_is_gone_succeeds(client, tenant, pool):
    contact_id = await create_contact(client, tenant)
    await booked_appointment(client, tenant, contact_id)
    assert (
        await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    ).status_code == 409
    await tenant_sql(pool, tenant, "DELETE FROM appointments")
    assert (
        await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    ).status_code == 200


async def test_delete_non_uuid_is_400(client, tenant):
    response = await client.delete(f"{CONTACTS}/xyz", headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_delete_unknown_is_404(client, tenant):
    response = await client.delete(f"{CONTACTS}/{uuid.uuid4()}", headers=tenant.headers)
    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_delete_twice_is_404(client, tenant):
    contact_id = await create_contact(client, tenant)
    await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    response = await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 404


async def test_delete_without_key_is_401(client):
    assert (await client.delete(f"{CONTACTS}/{uuid.uuid4()}")).status_code == 401


async def test_any_no_action_reference_blocks_delete_with_409(client, tenant, pool):
    # Invoices, calls and messages reference contacts with NO ACTION keys: any such table works
    # (a shared table of tenant_data, as a later feature's would be).
    contact_id = await create_contact(client, tenant)
    table = f"tenant_data.later_feature_{uuid.uuid4().hex}"
    await pool.execute(
        f"CREATE TABLE {table} (sub_account_id uuid NOT NULL, contact_id uuid NOT NULL, "
        "FOREIGN KEY (sub_account_id, contact_id) REFERENCES tenant_data.contacts)"
    )
    try:
        await pool.execute(f"INSERT INTO {table} VALUES ($1, $2)", tenant.id, uuid.UUID(contact_id))
        response = await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
        assert response.status_code == 409
        assert await error_code(response) == "contact_referenced"
    finally:
        await pool.execute(f"DROP TABLE {table}")
