"""GET /wallet, agency credit, and the debit rules: never below zero, declines recorded."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
import pytest

from api.wallet import service as wallet
from tenancy.db import tenant_transaction
from tenancy.scope import TenantScope
from tests.factories import WALLET, credit


async def test_get_wallet_of_a_new_sub_account_is_empty(client, tenant):
    response = await client.get(WALLET, headers=tenant.headers)

    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "wallet": {"balance": 0, "currency": "USD"},
        "transactions": [],
        "total": 0,
        "limit": 50,
        "offset": 0,
        "has_more": False,
    }


async def test_agency_credit_shows_in_balance_and_transactions(client, tenant):
    assert await credit(client, tenant, 25.5) == 25.5

    body = await (await client.get(WALLET, headers=tenant.headers)).get_json()

    assert body["wallet"] == {"balance": 25.5, "currency": "USD"}
    assert body["total"] == 1
    [entry] = body["transactions"]
    assert entry["amount"] == 25.5 and entry["balance_after"] == 25.5
    assert entry["kind"] == "agency_credit" and entry["status"] == "posted"
    assert entry["description"] == "top-up"
    assert set(entry) == {
        "id",
        "amount",
        "balance_after",
        "kind",
        "status",
        "description",
        "reference_type",
        "reference_id",
        "created_at",
    }
    assert entry["created_at"].endswith("Z")


async def test_transactions_paginate_newest_first(client, tenant):
    for amount in (1, 2, 3):
        await credit(client, tenant, amount)

    first = await (await client.get(WALLET + "?limit=2", headers=tenant.headers)).get_json()
    rest = await (await client.get(WALLET + "?limit=2&offset=2", headers=tenant.headers)).get_json()

    assert [t["amount"] for t in first["transactions"]] == [3, 2]
    assert (first["total"], first["limit"], first["offset"], first["has_more"]) == (3, 2, 0, True)
    assert [t["amount"] for t in rest["transactions"]] == [1]
    assert (rest["offset"], rest["has_more"]) == (2, False)


@pytest.mark.parametrize(
    "query", ["limit=101", "limit=0", "limit=-1", "limit=abc", "offset=-1", "offset=x"]
)
async def test_wallet_bad_pagination_is_400(client, tenant, query):
    response = await client.get(f"{WALLET}?{query}", headers=tenant.headers)

    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "validation_error"


async def test_wallet_without_key_is_401(client):
    response = await client.get(WALLET)

    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "missing_api_key"


async def test_wallet_with_agency_key_is_401(client, tenant):
    response = await client.get(WALLET, headers=tenant.organisation.headers)

    assert response.status_code == 401


async def test_wallet_is_per_sub_account(client, tenant, tenant_second):
    await credit(client, tenant, 10)

    body = await (await client.get(WALLET, headers=tenant_second.headers)).get_json()

    assert body["wallet"]["balance"] == 0 and body["transactions"] == []


async def test_agency_credit_to_another_organisations_sub_account_is_404(
    client, tenant, tenant_second
):
    response = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant_second.id}/wallet/credit",
        json={"amount": 5},
        headers=tenant.organisation.headers,
    )

    assert response.status_code == 404
    body = await (await client.get(WALLET, headers=tenant_second.headers)).get_json()
    assert body["wallet"]["balance"] == 0


async def test_debit_takes_the_amount_and_writes_a_ledger_row(client, pool, tenant):
    await credit(client, tenant, 10)

    async with tenant_transaction(pool, tenant.schema) as conn:
        balance = await wallet.debit(conn, Decimal("2.50"), "email", "campaign send")

    assert balance == Decimal("7.50")
    body = await (await client.get(WALLET, headers=tenant.headers)).get_json()
    assert body["wallet"]["balance"] == 7.5
    newest = body["transactions"][0]
    assert (newest["amount"], newest["balance_after"], newest["kind"], newest["status"]) == (
        -2.5,
        7.5,
        "email",
        "posted",
    )


async def test_debit_the_balance_cannot_cover_is_402_and_recorded_as_declined(client, pool, tenant):
    await credit(client, tenant, 1)

    async with tenant_transaction(pool, tenant.schema) as conn:
        with pytest.raises(wallet.InsufficientFunds) as refused:
            await wallet.debit(conn, Decimal("1.01"), "sms")

    assert (refused.value.status, refused.value.code) == (402, "insufficient_funds")
    body = await (await client.get(WALLET, headers=tenant.headers)).get_json()
    assert body["wallet"]["balance"] == 1
    declined = body["transactions"][0]
    assert (declined["amount"], declined["balance_after"], declined["status"]) == (
        -1.01,
        1,
        "declined",
    )


async def test_declined_debit_whose_transaction_rolls_back_can_be_recorded_apart(
    client, pool, tenant
):
    with pytest.raises(wallet.InsufficientFunds):
        async with tenant_transaction(pool, tenant.schema) as conn:
            await wallet.debit(conn, Decimal("3"), "call")
    await wallet.record_declined(TenantScope(pool, tenant.id, tenant.schema), Decimal("3"), "call")

    body = await (await client.get(WALLET, headers=tenant.headers)).get_json()
    assert body["wallet"]["balance"] == 0
    assert [(t["amount"], t["status"]) for t in body["transactions"]] == [(-3, "declined")]


async def test_concurrent_debits_never_take_the_balance_below_zero(client, pool, tenant):
    await credit(client, tenant, 10)

    async def charge_one() -> bool:
        async with tenant_transaction(pool, tenant.schema) as conn:
            try:
                await wallet.debit(conn, Decimal("1"), "email")
            except wallet.InsufficientFunds:
                return False
        return True

    results = await asyncio.gather(*(charge_one() for _ in range(20)))

    assert results.count(True) == 10
    async with tenant_transaction(pool, tenant.schema) as conn:
        assert await conn.fetchval("SELECT balance FROM wallet") == 0
        counts = dict(
            await conn.fetch(
                "SELECT status, count(*) FROM wallet_transactions "
                "WHERE kind = 'email' GROUP BY status"
            )
        )
    assert counts == {"posted": 10, "declined": 10}


async def test_database_refuses_a_negative_balance(pool, tenant):
    with pytest.raises(asyncpg.CheckViolationError):
        async with tenant_transaction(pool, tenant.schema) as conn:
            await conn.execute("UPDATE wallet SET balance = -0.01")
