"""Helpers for campaign, smart-list, conversation and tracking tests.

`worker` runs the real arq worker (due-work listener, sweeper, run_due) in this process for the
length of a test. `tenant_priced` is a sub-account on a plan that rebills email and SMS.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from decimal import Decimal
from email.message import Message
from typing import Any

import asyncpg
import pytest

from tenancy.clock import utcnow
from tenancy.db import tenant_transaction
from tests.conftest import Mailbox, Tenant, make_tenant, running_worker

BASE = "/webhooks/inbound"
CAMPAIGNS = f"{BASE}/campaigns"
EMAIL_PRICE = Decimal("0.05")
SMS_PRICE = Decimal("0.02")
HTML = ('<html><body><h1>Hello</h1><p>See <a href="https://example.com/offer?a=1&amp;b=2">'
        'the offer</a>.</p></body></html>')


def unique_email(prefix: str = "rcpt") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}@example.com"


async def add_contact(client: Any, tenant: Tenant, *, email: str | None = None,
                      phone: str | None = None, tags: list[str] | None = None,
                      first_name: str | None = None) -> str:
    body: dict[str, Any] = {"email": email or unique_email()} if phone is None else {
        "phone": phone}
    if email and phone:
        body["email"] = email
    if first_name:
        body["first_name"] = first_name
    response = await client.post(f"{BASE}/contacts", json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    contact_id = str((await response.get_json())["contact_id"])
    if tags:
        response = await client.post(f"{BASE}/contacts/{contact_id}/tags", json={"tags": tags},
                                     headers=tenant.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)
    return contact_id


async def contact_email(pool: asyncpg.Pool, tenant: Tenant, contact_id: str) -> str:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return str(await conn.fetchval("SELECT email FROM contacts WHERE id = $1",
                                       uuid.UUID(contact_id)))


async def credit(client: Any, tenant: Tenant, amount: Any) -> None:
    response = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant.id}/wallet/credit",
        json={"amount": amount}, headers=tenant.organisation.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)


async def balance(pool: asyncpg.Pool, tenant: Tenant) -> Decimal:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await conn.fetchval("SELECT balance FROM wallet WHERE id = 1")  # type: ignore


async def create_campaign(client: Any, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    body = {"name": "Spring sale", "campaign_type": "email", "subject": "Spring sale",
            "message_content": HTML, **fields}
    response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["campaign"]  # type: ignore[no-any-return]


async def schedule(client: Any, tenant: Tenant, campaign_id: str, start: datetime) -> Any:
    return await client.post(f"{CAMPAIGNS}/{campaign_id}/schedule",
                             json={"start_date": start.isoformat()}, headers=tenant.headers)


async def get_campaign(client: Any, tenant: Tenant, campaign_id: str) -> dict[str, Any]:
    response = await client.get(f"{CAMPAIGNS}/{campaign_id}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["campaign"]  # type: ignore[no-any-return]


async def wait_for_status(client: Any, tenant: Tenant, campaign_id: str,
                          *statuses: str) -> dict[str, Any]:
    """Poll until the campaign reaches one of `statuses` (a generous bound, not a timing)."""
    async with asyncio.timeout(90):
        while True:
            campaign = await get_campaign(client, tenant, campaign_id)
            if campaign["status"] in statuses:
                return campaign
            await asyncio.sleep(0.1)


def soon(seconds: float = 2.0) -> datetime:
    return utcnow() + timedelta(seconds=seconds)


async def error_code(response: Any) -> str:
    body = await response.get_json()
    assert body.get("status") == "error" or body.get("success") is False, body
    return str(body["error"]["code"])


def messages_to(mailbox: Mailbox, address: str) -> list[Message]:
    return mailbox.to(address)


def html_part(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/html":
            return str(part.get_payload(decode=True).decode())
    raise AssertionError("no html part")


def tracking_links(message: Message) -> dict[str, str]:
    """kind -> path of the first open, click and unsubscribe link in the message."""
    body = html_part(message)
    links = {}
    for kind in ("open", "click", "unsubscribe"):
        found = re.search(rf"https?://[^/\"']+(/track/{kind}/[A-Za-z0-9_\-.]+)", body)
        assert found, (kind, body)
        links[kind] = found.group(1)
    return links


async def ledger(pool: asyncpg.Pool, tenant: Tenant) -> list[asyncpg.Record]:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await conn.fetch(  # type: ignore[no-any-return]
            "SELECT amount, kind, status, reference_type, reference_id FROM wallet_transactions "
            "WHERE reference_type = 'campaign_recipient' ORDER BY created_at")


async def recipients(pool: asyncpg.Pool, tenant: Tenant, campaign_id: str) -> list[asyncpg.Record]:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await conn.fetch(  # type: ignore[no-any-return]
            "SELECT r.id, r.contact_id, r.state, r.charged_amount, r.sent_at, r.error, c.email "
            "FROM campaign_recipients AS r JOIN contacts AS c ON c.id = r.contact_id "
            "WHERE r.campaign_id = $1", uuid.UUID(campaign_id))


async def make_priced_tenant(client: Any, agency: Any) -> Tenant:
    slug = f"msg-{uuid.uuid4().hex[:8]}"
    response = await client.post("/functions/v1/agency/plans", json={
        "slug": slug, "name": "Messaging",
        "rebilling": {"email_per_message": float(EMAIL_PRICE),
                      "sms_per_message": float(SMS_PRICE)}}, headers=agency.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return await make_tenant(client, agency, plan=slug)


@pytest.fixture
async def tenant_priced(client: Any, agency: Any) -> Tenant:
    return await make_priced_tenant(client, agency)


@pytest.fixture
async def worker(migrated: str, servers: Any) -> AsyncIterator[Any]:
    """The real arq worker, running in this process until the test ends."""
    async with running_worker(migrated, servers.redis_url) as running:
        yield running
