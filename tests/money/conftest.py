"""Helpers for the wallet and invoice tests: contacts inserted directly, invoices via the API."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from tenancy.db import tenant_transaction

INVOICES = "/webhooks/inbound/invoices"
WALLET = "/webhooks/inbound/wallet"
DUE = "2026-12-31"
ITEMS = [{"item": "Consulting", "quantity": 2, "amount": 50}]


async def add_contact(pool: asyncpg.Pool, tenant: Any) -> uuid.UUID:
    async with tenant_transaction(pool, tenant.schema) as conn:
        contact_id: uuid.UUID = await conn.fetchval(
            "INSERT INTO contacts (name, email) VALUES ($1, $2) RETURNING id",
            "Ada Lovelace", f"ada-{uuid.uuid4().hex[:10]}@example.com")
    return contact_id


async def create_invoice(client: Any, tenant: Any, contact_id: uuid.UUID,
                         **fields: Any) -> dict[str, Any]:
    body = {"contact_id": str(contact_id), "items": ITEMS, "due_date": DUE, **fields}
    response = await client.post(INVOICES, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["invoice"]  # type: ignore[no-any-return]


async def stored_invoice(pool: asyncpg.Pool, tenant: Any, invoice_id: str) -> asyncpg.Record:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await conn.fetchrow("SELECT * FROM invoices WHERE id = $1", uuid.UUID(invoice_id))


async def credit(client: Any, tenant: Any, amount: Any) -> Any:
    response = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant.id}/wallet/credit",
        json={"amount": amount, "description": "top-up"}, headers=tenant.organisation.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["balance"]
