"""The catalog's events are emitted, and kept, once per change, in the change's transaction; a
refused request emits nothing (CONTRACT 7 "Event catalog")."""

from __future__ import annotations

import uuid

from tests.factories import CONTACTS, INVOICES, create_contact, create_invoice, make_contact
from tests.helpers import get_contact, stored_events


async def events_of(pool, tenant, event_type):
    return [event for event in await stored_events(pool, tenant) if event["type"] == event_type]


async def get_invoice(client, tenant, invoice_id):
    response = await client.get(f"{INVOICES}/{invoice_id}", headers=tenant.headers)
    return (await response.get_json())["invoice"]


# --- contact.created ------------------------------------------------------------------------


async def test_create_contact_emits_contact_created_with_the_contact(client, pool, tenant):
    contact_id = await create_contact(client, tenant, first_name="Ada", email="ada@example.com")
    [event] = await events_of(pool, tenant, "contact.created")
    assert event["data"] == {
        "sub_account_id": str(tenant.id),
        "contact": await get_contact(client, tenant, contact_id),
    }


async def test_create_matching_an_existing_contact_emits_no_contact_created(client, pool, tenant):
    await create_contact(client, tenant, email="ada@example.com")
    matched = await client.post(
        CONTACTS, json={"email": "ADA@example.com", "first_name": "Ada"}, headers=tenant.headers
    )
    assert (await matched.get_json())["created"] is False
    assert len(await events_of(pool, tenant, "contact.created")) == 1


async def test_refused_create_emits_nothing(client, pool, tenant):
    response = await client.post(
        CONTACTS, json={"first_name": "No address"}, headers=tenant.headers
    )
    assert response.status_code == 400
    assert await stored_events(pool, tenant) == []


# --- contact.deleted ------------------------------------------------------------------------


async def test_delete_contact_emits_contact_deleted_with_its_id(client, pool, tenant):
    contact_id = await create_contact(client, tenant)
    response = await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 200
    [event] = await events_of(pool, tenant, "contact.deleted")
    assert event["data"] == {"sub_account_id": str(tenant.id), "contact_id": contact_id}


async def test_refused_delete_emits_nothing(client, pool, tenant):
    contact_id = await create_contact(client, tenant)
    await create_invoice(client, tenant, contact_id)
    response = await client.delete(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 409
    missing = await client.delete(f"{CONTACTS}/{uuid.uuid4()}", headers=tenant.headers)
    assert missing.status_code == 404
    assert await events_of(pool, tenant, "contact.deleted") == []


# --- invoice.paid ---------------------------------------------------------------------------


async def test_mark_paid_emits_invoice_paid_once_with_the_invoice(client, pool, tenant):
    invoice = await create_invoice(client, tenant, await make_contact(client, tenant))
    path = f"{INVOICES}/{invoice['id']}/mark-paid"
    paid = await client.post(path, json={"payment_method": "cash"}, headers=tenant.headers)
    assert paid.status_code == 200
    again = await client.post(path, json={"payment_method": "cash"}, headers=tenant.headers)
    assert again.status_code == 409
    [event] = await events_of(pool, tenant, "invoice.paid")
    assert event["data"] == {
        "sub_account_id": str(tenant.id),
        "invoice": await get_invoice(client, tenant, invoice["id"]),
    }


async def test_refused_mark_paid_emits_nothing(client, pool, tenant):
    invoice = await create_invoice(client, tenant, await make_contact(client, tenant))
    path = f"{INVOICES}/{invoice['id']}/mark-paid"
    bad = await client.post(path, json={"payment_method": 5}, headers=tenant.headers)
    assert bad.status_code == 400
    void = await client.patch(
        f"{INVOICES}/{invoice['id']}", json={"status": "void"}, headers=tenant.headers
    )
    assert void.status_code == 200
    refused = await client.post(path, json={"payment_method": "cash"}, headers=tenant.headers)
    assert refused.status_code == 409
    assert await events_of(pool, tenant, "invoice.paid") == []
