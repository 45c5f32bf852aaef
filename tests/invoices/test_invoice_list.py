"""GET /invoices: newest first, filters `status` and `contact_id` (AND), items as GET
/invoices/{id} shows them."""

from __future__ import annotations

import uuid

from tests.factories import INVOICES, create_invoice, make_contact
from tests.helpers import expect_error


async def listed(client, tenant, query=""):
    response = await client.get(f"{INVOICES}{query}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def test_items_are_shaped_as_the_single_read(client, tenant):
    contact_id = await make_contact(client, tenant)
    made = await create_invoice(client, tenant, contact_id, notes="first")
    single = await (await client.get(f"{INVOICES}/{made['id']}", headers=tenant.headers)).get_json()
    assert (await listed(client, tenant))["invoices"] == [single["invoice"]]


async def test_filters_by_status_and_contact_combine(client, tenant):
    ada = await make_contact(client, tenant, phone=None)
    bob = await make_contact(client, tenant, phone=None)
    ada_pending = await create_invoice(client, tenant, ada)
    ada_paid = await create_invoice(client, tenant, ada)
    bob_paid = await create_invoice(client, tenant, bob)
    for invoice in (ada_paid, bob_paid):
        response = await client.post(
            f"{INVOICES}/{invoice['id']}/mark-paid",
            json={"payment_method": "cash"},
            headers=tenant.headers,
        )
        assert response.status_code == 200

    paid = await listed(client, tenant, "?status=paid")
    of_ada = await listed(client, tenant, f"?contact_id={ada}")
    ada_and_paid = await listed(client, tenant, f"?contact_id={ada}&status=paid")

    assert [i["id"] for i in paid["invoices"]] == [bob_paid["id"], ada_paid["id"]]
    assert paid["total"] == 2
    assert [i["id"] for i in of_ada["invoices"]] == [ada_paid["id"], ada_pending["id"]]
    assert [i["id"] for i in ada_and_paid["invoices"]] == [ada_paid["id"]]
    assert ada_and_paid["total"] == 1


async def test_unknown_contact_filter_lists_nothing(client, tenant):
    await create_invoice(client, tenant, await make_contact(client, tenant))
    body = await listed(client, tenant, f"?contact_id={uuid.uuid4()}")
    assert (body["invoices"], body["total"]) == ([], 0)


async def test_another_sub_accounts_invoices_are_not_listed_even_by_its_contact(
    client, tenant, tenant_second
):
    theirs = await make_contact(client, tenant_second)
    await create_invoice(client, tenant_second, theirs)
    assert (await listed(client, tenant))["total"] == 0
    body = await listed(client, tenant, f"?contact_id={theirs}")
    assert (body["invoices"], body["total"]) == ([], 0)


async def test_uppercase_uuid_filter_is_accepted(client, tenant):
    contact_id = await make_contact(client, tenant)
    made = await create_invoice(client, tenant, contact_id)
    body = await listed(client, tenant, f"?contact_id={contact_id.upper()}")
    assert [i["id"] for i in body["invoices"]] == [made["id"]]


async def test_a_bad_filter_beside_a_good_one_names_only_the_bad_one(client, tenant):
    response = await client.get(f"{INVOICES}?status=pending&contact_id=42", headers=tenant.headers)
    body = await expect_error(response, 400, "validation_error")
    assert [d["field"] for d in body["error"]["details"]] == ["contact_id"]
