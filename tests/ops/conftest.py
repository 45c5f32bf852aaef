"""Helpers for the operations tests: the real CLI, a sub-account with data in it, snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from tests.conftest import Tenant, make_agency

SWITCHBOARD = [sys.executable, "-m", "cli"]
WALLET = "/webhooks/inbound/wallet"


def switchboard(servers: Any, *args: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `switchboard ARGS...` as an operator would, against the test servers."""
    env = {**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis_url,
           **(env or {})}
    return subprocess.run([*SWITCHBOARD, *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@dataclass
class Populated:
    tenant: Tenant
    owner_user_id: uuid.UUID
    plan_slug: str


async def populate(client: Any, pool: asyncpg.Pool) -> Populated:
    """A sub-account on a plan, with a member, wallet credits, a webhook subscription, and a
    contact with a conversation and messages (arrays, jsonb, numeric, an identity column)."""
    agency = await make_agency(pool)
    plan = f"gold-{uuid.uuid4().hex[:8]}"
    response = await client.post("/functions/v1/agency/plans", headers=agency.headers,
                                 json={"slug": plan, "name": "Gold", "max_users": 5})
    assert response.status_code == 201, await response.get_data(as_text=True)
    owner = f"owner-{uuid.uuid4().hex[:10]}@example.com"
    response = await client.post("/functions/v1/create-subaccount-webhook",
                                 headers=agency.headers,
                                 json={"email": owner, "name": "Ops Tenant", "plan": plan})
    assert response.status_code == 201, await response.get_data(as_text=True)
    created = await response.get_json()
    sub_account_id = uuid.UUID(created["sub_account_id"])
    response = await client.post(f"/functions/v1/agency/sub-accounts/{sub_account_id}/api-keys",
                                 headers=agency.headers)
    key = (await response.get_json())["api_key"]
    response = await client.post("/functions/v1/accept-invitation",
                                 json={"token": created["invitation_token"], "first_name": "Ada"})
    assert response.status_code == 200, await response.get_data(as_text=True)
    owner_user_id = uuid.UUID((await response.get_json())["user_id"])
    for amount in (12.34, 0.66):
        response = await client.post(
            f"/functions/v1/agency/sub-accounts/{sub_account_id}/wallet/credit",
            headers=agency.headers, json={"amount": amount, "description": "top-up"})
        assert response.status_code == 200
    tenant = Tenant(sub_account_id, agency, key, f"t_{sub_account_id.hex}",
                    created["sub_account_slug"], owner)
    response = await client.post("/webhooks/inbound/webhook-subscriptions",
                                 headers=tenant.headers,
                                 json={"url": "https://hooks.example.com/in",
                                       "events": ["contact.updated"]})
    assert response.status_code == 201, await response.get_data(as_text=True)
    await _conversation(pool, tenant.schema)
    return Populated(tenant, owner_user_id, plan)


async def _conversation(pool: asyncpg.Pool, schema: str) -> None:
    from tenancy.db import tenant_transaction

    async with tenant_transaction(pool, schema) as conn:
        company = await conn.fetchval("INSERT INTO companies (name) VALUES ('Acme') RETURNING id")
        contact = await conn.fetchval(
            "INSERT INTO contacts (name, email, tags, custom_field_values, company_id) "
            "VALUES ('Grace', 'grace@example.com', ARRAY['vip', 'a \"quoted\" tag'], "
            "'{\"score\": 0.1, \"big\": 12345678901234567890.123, \"nested\": [1, null]}'::jsonb,"
            " $1) RETURNING id", company)
        conversation = await conn.fetchval(
            "INSERT INTO conversations (contact_id, last_message_at) VALUES ($1, now()) "
            "RETURNING id", contact)
        for content in ("hello", "again"):
            await conn.execute(
                "INSERT INTO messages (conversation_id, direction, sender_type, message_type, "
                "content, status) VALUES ($1, 'outbound', 'user', 'sms', $2, 'sent')",
                conversation, content)


CONTROL_ROWS = {
    "sub_accounts": "SELECT row_to_json(x)::text FROM control.sub_accounts AS x WHERE id = $1",
    "api_keys": "SELECT row_to_json(x)::text FROM control.api_keys AS x WHERE sub_account_id = $1",
    "memberships": "SELECT row_to_json(x)::text FROM control.memberships AS x "
                   "WHERE sub_account_id = $1",
    "invitations": "SELECT row_to_json(x)::text FROM control.invitations AS x "
                   "WHERE sub_account_id = $1",
    "users": "SELECT row_to_json(x)::text FROM control.users AS x WHERE id IN "
             "(SELECT user_id FROM control.memberships WHERE sub_account_id = $1)",
}


async def snapshot(pool: asyncpg.Pool, tenant: Tenant) -> dict[str, list[str]]:
    """Every stored row of the sub-account, control and tenant, as PostgreSQL prints it."""
    from tenancy.db import tenant_transaction

    rows: dict[str, list[str]] = {}
    for name, query in CONTROL_ROWS.items():
        rows[f"control.{name}"] = sorted(r[0] for r in await pool.fetch(query, tenant.id))
    async with tenant_transaction(pool, tenant.schema) as conn:
        tables = await conn.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = to_regnamespace($1) "
            "AND relkind = 'r'", tenant.schema)
        for (table,) in tables:
            rows[table] = sorted(r[0] for r in await conn.fetch(
                f'SELECT row_to_json(t)::text FROM "{table}" AS t'))
    return rows


async def schema_exists(pool: asyncpg.Pool, schema: str) -> bool:
    return bool(await pool.fetchval("SELECT to_regnamespace($1) IS NOT NULL", schema))


@pytest.fixture
async def populated(client: Any, pool: asyncpg.Pool) -> Populated:
    return await populate(client, pool)
