"""Invoices: create, GET, PATCH /invoices/{id} as SPEC.md states it, payment links, mark paid."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import asyncpg
import pytest

from tenancy.db import tenant_transaction
from tests.factories import DUE, INVOICES, ITEMS, create_invoice, insert_contact
from tests.helpers import error_code, stored_invoice

INVOICE_FIELDS = {
    "id",
    "invoice_number",
    "contact_id",
    "quote_id",
    "amount",
    "status",
    "issued_at",
    "due_date",
    "paid_at",
    "payment_method",
    "notes",
    "items",
    "payment_url",
    "payment_link_expires_at",
    "created_at",
    "updated_at",
}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.fixture
async def contact(pool, tenant):
    return await insert_contact(pool, tenant)


@pytest.fixture
async def invoice(client, tenant, contact):
    return await create_invoice(client, tenant, contact)


async def patch(client, tenant, invoice_id, body):
    return await client.patch(f"{INVOICES}/{invoice_id}", json=body, headers=tenant.headers)


async def mark_paid(client, tenant, invoice_id, method="card"):
    return await client.post(
        f"{INVOICES}/{invoice_id}/mark-paid",
        json={"payment_method": method},
        headers=tenant.headers,
    )


async def payment_link(client, tenant, invoice_id):
    return await client.post(f"{INVOICES}/{invoice_id}/payment-link", headers=tenant.headers)


# --- create -----------------------------------------------------------------------------------


async def test_create_invoice_is_201_pending_with_the_spec_shape(client, tenant, contact):
    quote_id = uuid.uuid4()
    response = await client.post(
        INVOICES,
        headers=tenant.headers,
        json={
            "contact_id": str(contact),
            "due_date": DUE,
            "notes": "thanks",
            "quote_id": str(quote_id),
            "items": [
                {"item": "Setup", "quantity": 1, "amount": 99.5},
                {"item": "Hours", "quantity": 3, "amount": 0.335},
            ],
        },
    )

    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success"
    invoice = body["invoice"]
    assert set(invoice) == INVOICE_FIELDS
    assert invoice["invoice_number"] == "INV-000001"
    assert invoice["contact_id"] == str(contact) and invoice["quote_id"] == str(quote_id)
    assert invoice["amount"] == 100.51 and invoice["status"] == "pending"
    assert invoice["due_date"] == DUE and invoice["notes"] == "thanks"
    assert invoice["items"] == [
        {"item": "Setup", "quantity": 1, "amount": 99.5},
        {"item": "Hours", "quantity": 3, "amount": 0.335},
    ]
    assert invoice["paid_at"] is None and invoice["payment_method"] is None
    assert invoice["payment_url"] is None and invoice["payment_link_expires_at"] is None
    for field in ("issued_at", "created_at", "updated_at"):
        assert TIMESTAMP.match(invoice[field])


async def test_a_whole_quantity_written_as_3_0_is_the_integer_3(client, pool, tenant, contact):
    # JSON has one number type; JSON Schema's `integer` (the document's) includes 3.0.
    response = await client.post(
        INVOICES,
        headers=tenant.headers,
        json={
            "contact_id": str(contact),
            "due_date": DUE,
            "items": [{"item": "Hours", "quantity": 3.0, "amount": 10}],
        },
    )

    assert response.status_code == 201, await response.get_data(as_text=True)
    invoice = (await response.get_json())["invoice"]
    assert invoice["items"] == [{"item": "Hours", "quantity": 3, "amount": 10}]
    assert invoice["amount"] == 30
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["items"][0]["quantity"] == 3 and isinstance(row["items"][0]["quantity"], int)


async def test_create_invoice_is_stored(client, pool, tenant, contact):
    invoice = await create_invoice(client, tenant, contact)

    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["amount"] == Decimal("100.00") and row["status"] == "pending"
    assert row["contact_id"] == contact


async def test_create_without_contact_is_400(client, tenant):
    response = await client.post(
        INVOICES, json={"items": ITEMS, "due_date": DUE}, headers=tenant.headers
    )

    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_create_contact_id_not_uuid_is_400_invalid_uuid(client, tenant):
    response = await client.post(
        INVOICES,
        json={"contact_id": "nope", "items": ITEMS, "due_date": DUE},
        headers=tenant.headers,
    )

    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_create_for_unknown_contact_is_404(client, tenant):
    response = await client.post(
        INVOICES,
        json={"contact_id": str(uuid.uuid4()), "items": ITEMS, "due_date": DUE},
        headers=tenant.headers,
    )

    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_create_for_another_sub_accounts_contact_is_404(client, pool, tenant, tenant_second):
    foreign = await insert_contact(pool, tenant_second)

    response = await client.post(
        INVOICES,
        json={"contact_id": str(foreign), "items": ITEMS, "due_date": DUE},
        headers=tenant.headers,
    )

    assert response.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"items": []},
        {"items": [{"item": "x", "quantity": 0, "amount": 1}]},
        {"due_date": "2026-02-30"},
        {"due_date": None},
        {"quote_id": "not-a-uuid"},
    ],
)
async def test_create_with_invalid_fields_is_400_and_creates_nothing(
    client, pool, tenant, contact, body
):
    response = await client.post(
        INVOICES,
        headers=tenant.headers,
        json={"contact_id": str(contact), "items": ITEMS, "due_date": DUE, **body},
    )

    assert response.status_code == 400
    async with tenant_transaction(pool, tenant.schema) as conn:
        assert await conn.fetchval("SELECT count(*) FROM invoices") == 0


async def test_create_without_key_is_401(client, contact):
    response = await client.post(
        INVOICES, json={"contact_id": str(contact), "items": ITEMS, "due_date": DUE}
    )

    assert response.status_code == 401


async def test_invoice_numbers_follow_on(client, tenant, contact):
    first = await create_invoice(client, tenant, contact)
    second = await create_invoice(client, tenant, contact)

    assert (first["invoice_number"], second["invoice_number"]) == ("INV-000001", "INV-000002")


async def test_a_failed_create_leaves_no_gap_in_numbers(client, tenant, contact):
    await create_invoice(client, tenant, contact)
    refused = await client.post(
        INVOICES,
        json={"contact_id": str(uuid.uuid4()), "items": ITEMS, "due_date": DUE},
        headers=tenant.headers,
    )
    assert refused.status_code == 404

    after = await create_invoice(client, tenant, contact)

    assert after["invoice_number"] == "INV-000002"


async def test_invoice_numbers_count_per_sub_account(client, pool, tenant, tenant_second, contact):
    await create_invoice(client, tenant, contact)
    await create_invoice(client, tenant, contact)

    other = await create_invoice(client, tenant_second, await insert_contact(pool, tenant_second))

    assert other["invoice_number"] == "INV-000001"


async def test_30_concurrent_creates_get_numbers_without_gaps_or_duplicates(
    client, tenant, contact
):
    invoices = await asyncio.gather(*(create_invoice(client, tenant, contact) for _ in range(30)))

    numbers = sorted(invoice["invoice_number"] for invoice in invoices)
    assert numbers == [f"INV-{n:06d}" for n in range(1, 31)]


# --- rounding ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "total"),
    [
        ([(3, 0.335)], 1.01),
        ([(1, 0.015)], 0.02),
        ([(1, 0.0149)], 0.01),
        ([(3, 0.3333)], 1.0),
        ([(7, 1.4285)], 10.0),
        ([(2, 0.0125)], 0.03),
        # Rounded once, on the sum: per-line rounding would give 0.02.
        ([(1, 0.0125), (1, 0.0125)], 0.03),
        ([(1, 19.99), (2, 5.005)], 30.0),
        ([(1, 0.1), (1, 0.2)], 0.3),
        ([(100, 1000000)], 100000000),
    ],
)
async def test_total_is_sum_of_price_times_quantity_rounded_half_up_to_cents(
    client, pool, tenant, contact, items, total
):
    body = [
        {"item": f"line {n}", "quantity": quantity, "amount": amount}
        for n, (quantity, amount) in enumerate(items)
    ]

    invoice = await create_invoice(client, tenant, contact, items=body)

    assert invoice["amount"] == total
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["amount"] == Decimal(str(total)).quantize(Decimal("0.01"))


async def test_patch_items_recalculates_the_rounded_total(client, tenant, invoice):
    response = await patch(
        client,
        tenant,
        invoice["id"],
        {"items": [{"item": "Hours", "quantity": 3, "amount": 0.335}]},
    )

    assert response.status_code == 200
    assert (await response.get_json())["invoice"]["amount"] == 1.01


# --- GET --------------------------------------------------------------------------------------


async def test_get_invoice_is_200(client, tenant, invoice):
    response = await client.get(f"{INVOICES}/{invoice['id']}", headers=tenant.headers)

    assert response.status_code == 200
    assert await response.get_json() == {"status": "success", "invoice": invoice}


async def test_get_invoice_not_uuid_is_400(client, tenant):
    response = await client.get(f"{INVOICES}/123", headers=tenant.headers)

    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_get_unknown_invoice_is_404(client, tenant):
    response = await client.get(f"{INVOICES}/{uuid.uuid4()}", headers=tenant.headers)

    assert response.status_code == 404


async def test_get_another_sub_accounts_invoice_is_404(client, pool, tenant, tenant_second):
    foreign = await create_invoice(client, tenant_second, await insert_contact(pool, tenant_second))

    response = await client.get(f"{INVOICES}/{foreign['id']}", headers=tenant.headers)

    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_get_invoice_without_key_is_401(client, invoice):
    response = await client.get(f"{INVOICES}/{invoice['id']}")

    assert response.status_code == 401


# --- PATCH: success ---------------------------------------------------------------------------


async def test_patch_changes_only_the_fields_sent(client, tenant, invoice):
    response = await patch(client, tenant, invoice["id"], {"notes": "net 30"})

    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success" and body["payment_link_cleared"] is False
    changed = body["invoice"]
    assert changed["notes"] == "net 30"
    unchanged = {key: value for key, value in changed.items() if key not in ("notes", "updated_at")}
    assert unchanged == {
        key: value for key, value in invoice.items() if key not in ("notes", "updated_at")
    }
    assert changed["updated_at"] >= invoice["updated_at"]


async def test_patch_items_replaces_all_line_items(client, pool, tenant, invoice):
    items = [
        {"item": "A", "quantity": 1, "amount": 10},
        {"item": "B", "quantity": 4, "amount": 2.5},
    ]

    response = await patch(client, tenant, invoice["id"], {"items": items})

    changed = (await response.get_json())["invoice"]
    assert changed["items"] == items and changed["amount"] == 20
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["amount"] == Decimal("20.00") and len(row["items"]) == 2


async def test_patch_accepts_200_items(client, tenant, invoice):
    items = [{"item": f"line {n}", "quantity": 1, "amount": 0.01} for n in range(200)]

    response = await patch(client, tenant, invoice["id"], {"items": items})

    assert response.status_code == 200
    assert (await response.get_json())["invoice"]["amount"] == 2


async def test_patch_contact_id_bills_another_contact(client, pool, tenant, invoice):
    other = await insert_contact(pool, tenant)

    response = await patch(client, tenant, invoice["id"], {"contact_id": str(other)})

    assert response.status_code == 200
    assert (await response.get_json())["invoice"]["contact_id"] == str(other)


async def test_patch_due_date(client, tenant, invoice):
    response = await patch(client, tenant, invoice["id"], {"due_date": "2028-02-29"})

    assert response.status_code == 200
    assert (await response.get_json())["invoice"]["due_date"] == "2028-02-29"


@pytest.mark.parametrize("cleared", [None, "", "   "])
async def test_patch_notes_null_or_empty_clears(client, pool, tenant, contact, cleared):
    invoice = await create_invoice(client, tenant, contact, notes="old")

    response = await patch(client, tenant, invoice["id"], {"notes": cleared})

    assert response.status_code == 200
    assert (await response.get_json())["invoice"]["notes"] is None
    assert (await stored_invoice(pool, tenant, invoice["id"]))["notes"] is None


@pytest.mark.parametrize(
    "path", [["void"], ["refunded"], ["void", "pending"], ["refunded", "void"], ["pending"]]
)
async def test_patch_status_moves_a_non_paid_invoice(client, tenant, invoice, path):
    for status in path:
        response = await patch(client, tenant, invoice["id"], {"status": status})
        assert response.status_code == 200
        assert (await response.get_json())["invoice"]["status"] == status


async def test_patch_paid_invoice_to_refunded_is_allowed(client, tenant, invoice):
    await mark_paid(client, tenant, invoice["id"])

    response = await patch(client, tenant, invoice["id"], {"status": "refunded"})

    assert response.status_code == 200
    refunded = (await response.get_json())["invoice"]
    assert refunded["status"] == "refunded" and refunded["paid_at"] is not None


async def test_patch_notes_of_a_paid_invoice_is_allowed(client, tenant, invoice):
    await mark_paid(client, tenant, invoice["id"])

    response = await patch(client, tenant, invoice["id"], {"notes": "received, thanks"})

    assert response.status_code == 200
    assert (await response.get_json())["invoice"]["status"] == "paid"


# --- PATCH: payment link ----------------------------------------------------------------------


async def test_changed_amount_clears_the_payment_link(client, pool, tenant, invoice):
    assert (await payment_link(client, tenant, invoice["id"])).status_code == 200

    response = await patch(
        client, tenant, invoice["id"], {"items": [{"item": "More", "quantity": 1, "amount": 150}]}
    )

    body = await response.get_json()
    assert body["payment_link_cleared"] is True
    assert body["invoice"]["payment_url"] is None
    assert body["invoice"]["payment_link_expires_at"] is None
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["payment_url"] is None and row["payment_link_expires_at"] is None


async def test_items_with_the_same_total_keep_the_payment_link(client, tenant, invoice):
    linked = await (await payment_link(client, tenant, invoice["id"])).get_json()

    response = await patch(
        client,
        tenant,
        invoice["id"],
        {"items": [{"item": "Same total", "quantity": 4, "amount": 25}]},
    )

    body = await response.get_json()
    assert body["payment_link_cleared"] is False
    assert body["invoice"]["payment_url"] == linked["invoice"]["payment_url"]


async def test_changed_amount_without_a_link_reports_nothing_cleared(client, tenant, invoice):
    response = await patch(
        client, tenant, invoice["id"], {"items": [{"item": "More", "quantity": 1, "amount": 150}]}
    )

    assert (await response.get_json())["payment_link_cleared"] is False


async def test_other_changes_keep_the_payment_link(client, tenant, invoice):
    linked = await (await payment_link(client, tenant, invoice["id"])).get_json()

    response = await patch(client, tenant, invoice["id"], {"notes": "x", "due_date": "2027-01-01"})

    body = await response.get_json()
    assert body["payment_link_cleared"] is False
    assert body["invoice"]["payment_url"] == linked["invoice"]["payment_url"]


# --- PATCH: 400 -------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{}, {"unknown": 1}])
async def test_patch_with_nothing_to_update_is_400(client, tenant, invoice, body):
    response = await patch(client, tenant, invoice["id"], body)

    assert response.status_code == 400
    assert await error_code(response) == "nothing_to_update"


async def test_patch_contact_id_not_uuid_is_400_invalid_uuid(client, tenant, invoice):
    response = await patch(client, tenant, invoice["id"], {"contact_id": "12345"})

    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_patch_invoice_id_not_uuid_is_400_invalid_uuid(client, tenant):
    response = await patch(client, tenant, "not-a-uuid", {"notes": "x"})

    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


BAD_ITEMS = [
    [],
    [{"item": "x", "quantity": 1, "amount": 1}] * 201,
    [{"item": "", "quantity": 1, "amount": 1}],
    [{"item": "   ", "quantity": 1, "amount": 1}],
    [{"item": 5, "quantity": 1, "amount": 1}],
    [{"quantity": 1, "amount": 1}],
    [{"item": "x", "quantity": 0, "amount": 1}],
    [{"item": "x", "quantity": -1, "amount": 1}],
    [{"item": "x", "quantity": 1.5, "amount": 1}],
    [{"item": "x", "quantity": 1e300, "amount": 1}],
    [{"item": "x", "quantity": "1", "amount": 1}],
    [{"item": "x", "quantity": True, "amount": 1}],
    [{"item": "x", "amount": 1}],
    [{"item": "x", "quantity": 1, "amount": 0}],
    [{"item": "x", "quantity": 1, "amount": 0.009}],
    [{"item": "x", "quantity": 1, "amount": -5}],
    [{"item": "x", "quantity": 1, "amount": "1.00"}],
    [{"item": "x", "quantity": 1, "amount": 1.00001}],
    [{"item": "x", "quantity": 1, "amount": None}],
    [{"item": "x", "quantity": 1}],
    ["x"],
    None,
    "items",
    {"item": "x", "quantity": 1, "amount": 1},
]


@pytest.mark.parametrize("items", BAD_ITEMS)
async def test_patch_invalid_items_is_400_and_changes_nothing(client, pool, tenant, invoice, items):
    response = await patch(client, tenant, invoice["id"], {"items": items})

    assert response.status_code == 400
    assert await error_code(response) == "validation_error"
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["amount"] == Decimal("100.00") and len(row["items"]) == 1


async def test_patch_total_too_large_for_the_amount_column_is_400(client, tenant, invoice):
    items = [{"item": f"l{n}", "quantity": 100000, "amount": 1000000} for n in range(2)]

    response = await patch(client, tenant, invoice["id"], {"items": items})

    assert response.status_code == 400


@pytest.mark.parametrize(
    "due_date",
    [
        "2026-02-30",
        "2026-13-01",
        "2026-2-3",
        "12/01/2026",
        "2026-12-01T00:00:00Z",
        "",
        "tomorrow",
        None,
        20261201,
    ],
)
async def test_patch_invalid_due_date_is_400(client, tenant, invoice, due_date):
    response = await patch(client, tenant, invoice["id"], {"due_date": due_date})

    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


@pytest.mark.parametrize("status", ["paid", "closed", "", None, 1])
async def test_patch_invalid_status_is_400(client, pool, tenant, invoice, status):
    response = await patch(client, tenant, invoice["id"], {"status": status})

    assert response.status_code == 400
    assert await error_code(response) == "validation_error"
    assert (await stored_invoice(pool, tenant, invoice["id"]))["status"] == "pending"


@pytest.mark.parametrize(
    "body", [{"contact_id": None}, {"contact_id": 7}, {"notes": 5}, {"notes": "x" * 5001}]
)
async def test_patch_invalid_contact_id_or_notes_is_400(client, tenant, invoice, body):
    response = await patch(client, tenant, invoice["id"], body)

    assert response.status_code == 400


async def test_patch_body_not_json_is_400(client, tenant, invoice):
    response = await client.patch(
        f"{INVOICES}/{invoice['id']}",
        data="{oops",
        headers={**tenant.headers, "content-type": "application/json"},
    )

    assert response.status_code == 400
    assert await error_code(response) == "invalid_json"


async def test_patch_body_not_an_object_is_400(client, tenant, invoice):
    response = await patch(client, tenant, invoice["id"], ["notes"])

    assert response.status_code == 400


# --- PATCH: 401, 404, 409 ---------------------------------------------------------------------


async def test_patch_without_key_is_401(client, invoice):
    response = await client.patch(f"{INVOICES}/{invoice['id']}", json={"notes": "x"})

    assert response.status_code == 401


async def test_patch_unknown_invoice_is_404(client, tenant):
    response = await patch(client, tenant, uuid.uuid4(), {"notes": "x"})

    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_patch_another_sub_accounts_invoice_is_404_and_changes_nothing(
    client, pool, tenant, tenant_second
):
    foreign = await create_invoice(client, tenant_second, await insert_contact(pool, tenant_second))

    response = await patch(client, tenant, foreign["id"], {"notes": "mine now"})

    assert response.status_code == 404
    assert (await stored_invoice(pool, tenant_second, foreign["id"]))["notes"] is None


async def test_patch_unknown_contact_is_404(client, tenant, invoice):
    response = await patch(client, tenant, invoice["id"], {"contact_id": str(uuid.uuid4())})

    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_patch_another_sub_accounts_contact_is_404_and_changes_nothing(
    client, pool, tenant, tenant_second, invoice
):
    foreign = await insert_contact(pool, tenant_second)

    response = await patch(
        client, tenant, invoice["id"], {"contact_id": str(foreign), "notes": "x"}
    )

    assert response.status_code == 404
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert str(row["contact_id"]) == invoice["contact_id"] and row["notes"] is None


@pytest.mark.parametrize("status", ["pending", "void"])
async def test_patch_paid_invoice_to_pending_or_void_is_409(client, pool, tenant, invoice, status):
    await mark_paid(client, tenant, invoice["id"])

    response = await patch(client, tenant, invoice["id"], {"status": status, "notes": "x"})

    assert response.status_code == 409
    assert await error_code(response) == "invoice_paid"
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["status"] == "paid" and row["notes"] is None


async def test_patch_items_of_a_paid_invoice_is_409(client, pool, tenant, invoice):
    await mark_paid(client, tenant, invoice["id"])

    response = await patch(
        client, tenant, invoice["id"], {"items": [{"item": "x", "quantity": 1, "amount": 1}]}
    )

    assert response.status_code == 409
    assert (await stored_invoice(pool, tenant, invoice["id"]))["amount"] == Decimal("100.00")


# --- PATCH: races -----------------------------------------------------------------------------


async def test_concurrent_patches_of_different_fields_lose_no_update(client, tenant, contact):
    invoices = [await create_invoice(client, tenant, contact) for _ in range(5)]
    items = [{"item": "Raced", "quantity": 2, "amount": 7.25}]

    responses = await asyncio.gather(
        *(
            request
            for invoice in invoices
            for request in (
                patch(client, tenant, invoice["id"], {"notes": "raced note"}),
                patch(client, tenant, invoice["id"], {"items": items}),
                patch(client, tenant, invoice["id"], {"due_date": "2030-01-01"}),
                patch(client, tenant, invoice["id"], {"status": "void"}),
            )
        )
    )

    assert [r.status_code for r in responses] == [200] * len(responses)
    for invoice in invoices:
        final = await (
            await client.get(f"{INVOICES}/{invoice['id']}", headers=tenant.headers)
        ).get_json()
        assert final["invoice"]["notes"] == "raced note"
        assert final["invoice"]["items"] == items and final["invoice"]["amount"] == 14.5
        assert final["invoice"]["due_date"] == "2030-01-01"
        assert final["invoice"]["status"] == "void"


async def test_mark_paid_racing_a_void_patch_leaves_one_winner(client, pool, tenant, contact):
    for _ in range(5):
        invoice = await create_invoice(client, tenant, contact)

        paid, voided = await asyncio.gather(
            mark_paid(client, tenant, invoice["id"]),
            patch(client, tenant, invoice["id"], {"status": "void"}),
        )

        row = await stored_invoice(pool, tenant, invoice["id"])
        assert sorted([paid.status_code, voided.status_code]) == [200, 409]
        assert row["status"] == ("paid" if paid.status_code == 200 else "void")


# --- payment link -----------------------------------------------------------------------------


async def test_payment_link_is_set_on_a_pending_invoice(client, app, pool, tenant, invoice):
    response = await payment_link(client, tenant, invoice["id"])

    assert response.status_code == 200
    linked = (await response.get_json())["invoice"]
    public_url = app.app.config["SETTINGS"].public_url.rstrip("/")
    assert re.match(re.escape(public_url) + r"/pay/[A-Za-z0-9_-]{20,}$", linked["payment_url"])
    expires = datetime.fromisoformat(linked["payment_link_expires_at"].replace("Z", "+00:00"))
    assert expires > datetime.now(UTC)
    assert (await stored_invoice(pool, tenant, invoice["id"]))["payment_url"] == linked[
        "payment_url"
    ]


async def test_payment_link_again_replaces_the_link(client, tenant, invoice):
    first = await (await payment_link(client, tenant, invoice["id"])).get_json()
    second = await (await payment_link(client, tenant, invoice["id"])).get_json()

    assert first["invoice"]["payment_url"] != second["invoice"]["payment_url"]


async def test_payment_link_for_a_void_invoice_is_409(client, tenant, invoice):
    await patch(client, tenant, invoice["id"], {"status": "void"})

    response = await payment_link(client, tenant, invoice["id"])

    assert response.status_code == 409
    assert await error_code(response) == "invoice_not_payable"


async def test_payment_link_for_a_paid_invoice_is_409(client, tenant, invoice):
    await mark_paid(client, tenant, invoice["id"])

    response = await payment_link(client, tenant, invoice["id"])

    assert response.status_code == 409
    assert await error_code(response) == "invoice_paid"


async def test_payment_link_invoice_id_not_uuid_is_400(client, tenant):
    response = await payment_link(client, tenant, "abc")

    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_payment_link_for_another_sub_accounts_invoice_is_404(
    client, pool, tenant, tenant_second
):
    foreign = await create_invoice(client, tenant_second, await insert_contact(pool, tenant_second))

    response = await payment_link(client, tenant, foreign["id"])

    assert response.status_code == 404
    assert (await stored_invoice(pool, tenant_second, foreign["id"]))["payment_url"] is None


async def test_payment_link_without_key_is_401(client, invoice):
    response = await client.post(f"{INVOICES}/{invoice['id']}/payment-link")

    assert response.status_code == 401


# --- mark paid --------------------------------------------------------------------------------


async def test_mark_paid_sets_paid_and_paid_at(client, pool, tenant, invoice):
    response = await mark_paid(client, tenant, invoice["id"], "bank_transfer")

    assert response.status_code == 200
    paid = (await response.get_json())["invoice"]
    assert paid["status"] == "paid" and paid["payment_method"] == "bank_transfer"
    assert TIMESTAMP.match(paid["paid_at"])
    row = await stored_invoice(pool, tenant, invoice["id"])
    assert row["status"] == "paid" and row["paid_at"] is not None


async def test_mark_paid_twice_is_409(client, tenant, invoice):
    await mark_paid(client, tenant, invoice["id"])

    response = await mark_paid(client, tenant, invoice["id"])

    assert response.status_code == 409
    assert await error_code(response) == "invoice_paid"


@pytest.mark.parametrize("status", ["void", "refunded"])
async def test_mark_paid_of_a_void_or_refunded_invoice_is_409(
    client, pool, tenant, invoice, status
):
    await patch(client, tenant, invoice["id"], {"status": status})

    response = await mark_paid(client, tenant, invoice["id"])

    assert response.status_code == 409
    assert await error_code(response) == "invoice_not_payable"
    assert (await stored_invoice(pool, tenant, invoice["id"]))["status"] == status


@pytest.mark.parametrize(
    "body", [{}, {"payment_method": ""}, {"payment_method": "  "}, {"payment_method": 3}]
)
async def test_mark_paid_without_payment_method_is_400(client, tenant, invoice, body):
    response = await client.post(
        f"{INVOICES}/{invoice['id']}/mark-paid", json=body, headers=tenant.headers
    )

    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_mark_paid_invoice_id_not_uuid_is_400(client, tenant):
    response = await mark_paid(client, tenant, "abc")

    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_mark_paid_of_unknown_invoice_is_404(client, tenant):
    response = await mark_paid(client, tenant, uuid.uuid4())

    assert response.status_code == 404


async def test_mark_paid_of_another_sub_accounts_invoice_is_404(
    client, pool, tenant, tenant_second
):
    foreign = await create_invoice(client, tenant_second, await insert_contact(pool, tenant_second))

    response = await mark_paid(client, tenant, foreign["id"])

    assert response.status_code == 404
    assert (await stored_invoice(pool, tenant_second, foreign["id"]))["status"] == "pending"


async def test_mark_paid_without_key_is_401(client, invoice):
    response = await client.post(
        f"{INVOICES}/{invoice['id']}/mark-paid", json={"payment_method": "card"}
    )

    assert response.status_code == 401


# --- references -------------------------------------------------------------------------------


async def test_a_billed_contact_cannot_be_deleted(pool, tenant, invoice):
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        async with tenant_transaction(pool, tenant.schema) as conn:
            await conn.execute(
                "DELETE FROM contacts WHERE id = $1", uuid.UUID(invoice["contact_id"])
            )
