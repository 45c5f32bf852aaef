"""The wallet under concurrent charges through the real routes of a running server: a balance
that covers ten messages pays for exactly ten of fifty sent at once, and the balance always
equals the sum of the posted ledger rows."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from decimal import Decimal
from typing import Any

import httpx

from tenancy.db import tenant_transaction
from tests.factories import Agency, make_tenant
from tests.helpers import Live

PRICE = Decimal("0.35")


async def test_fifty_concurrent_messages_on_ten_prices_charge_exactly_ten(
    client: Any, pool: Any, agency: Agency, live: Live
) -> None:  # noqa: F811
    slug = f"sms-{uuid.uuid4().hex[:8]}"
    response = await client.post(
        "/functions/v1/agency/plans",
        headers=agency.headers,
        json={"slug": slug, "name": "SMS", "rebilling": {"sms_per_message": float(PRICE)}},
    )
    assert response.status_code == 201
    tenant = await make_tenant(client, agency, plan=slug)
    response = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant.id}/wallet/credit",
        json={"amount": float(PRICE * 10)},
        headers=agency.headers,
    )
    assert response.status_code == 200
    contact_ids = []
    for index in range(5):
        response = await client.post(
            "/webhooks/inbound/contacts",
            headers=tenant.headers,
            json={"phone": f"+1415555{index:04d}"},
        )
        contact_ids.append((await response.get_json())["contact_id"])

    async with httpx.AsyncClient(
        base_url=live.base_url, timeout=60, limits=httpx.Limits(max_connections=50)
    ) as http:
        responses = await asyncio.gather(
            *(
                http.post(
                    f"/webhooks/inbound/contacts/{contact_ids[index % 5]}/messages",
                    headers=tenant.headers,
                    json={"message_type": "sms", "content": f"#{index}"},
                )
                for index in range(50)
            )
        )

    statuses = Counter(response.status_code for response in responses)
    assert statuses == {201: 10, 402: 40}, statuses
    assert all(
        response.json()["error"]["code"] == "insufficient_funds"
        for response in responses
        if response.status_code == 402
    )
    wallet = (
        await (await client.get("/webhooks/inbound/wallet", headers=tenant.headers)).get_json()
    )["wallet"]
    assert Decimal(str(wallet["balance"])) == 0
    async with tenant_transaction(pool, tenant.schema) as conn:
        balance = await conn.fetchval("SELECT balance FROM wallet")
        posted = await conn.fetchval(
            "SELECT sum(amount) FROM wallet_transactions WHERE status = 'posted'"
        )
        charges = await conn.fetchval(
            "SELECT count(*) FROM wallet_transactions WHERE status = 'posted' AND amount < 0"
        )
        declined = await conn.fetchval(
            "SELECT count(*) FROM wallet_transactions WHERE status = 'declined'"
        )
        sent = await conn.fetchval("SELECT count(*) FROM messages WHERE status = 'sent'")
    assert balance == posted == 0
    assert (charges, declined, sent) == (10, 40, 10)
