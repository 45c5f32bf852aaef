"""Every factory of the suite: one record made the way a client makes it (through the API) or,
where the API cannot, in the tenant's schema; each returns what a test needs of it.

The fixtures built from these (`agency` / `agency_second`, `tenant` / `tenant_second`,
`tenant_priced`, `member`, `populated`) live in tests/conftest.py.
"""

from __future__ import annotations

import random
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import asyncpg

from api.agents.sample import create_agent_body
from api.events import emit, emit_to
from tenancy.db import tenant_transaction

# --- paths --------------------------------------------------------------------------------------

BASE = "/webhooks/inbound"
CONTACTS = f"{BASE}/contacts"
CAMPAIGNS = f"{BASE}/campaigns"
INVOICES = f"{BASE}/invoices"
WALLET = f"{BASE}/wallet"
SUBSCRIPTIONS = f"{BASE}/webhook-subscriptions"
CREATE = "/functions/v1/create-subaccount-webhook"
ADD_USER = "/functions/v1/crm-api/add-subaccount-user"
ACCEPT = "/functions/v1/accept-invitation"
PLANS = "/functions/v1/agency/plans"
SUB_ACCOUNTS = "/functions/v1/agency/sub-accounts"


def unique_email(prefix: str = "user") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}@example.com"


def unique_phone() -> str:
    """A random number that is valid E.164 and valid for `phonenumbers` (San Francisco)."""
    from api.contacts.service import valid_phone

    while True:
        number = f"+1415{random.randint(2_000_000, 9_999_999)}"
        if valid_phone(number) == number:
            return number


# --- organisations, plans, sub-accounts, members -----------------------------------------------


@dataclass
class Agency:
    id: uuid.UUID
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.key}


@dataclass
class Tenant:
    id: uuid.UUID
    organisation: Agency
    key: str
    schema: str
    slug: str
    owner_email: str

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.key}


async def make_agency(
    pool: asyncpg.Pool,
    *,
    plan_type: str = "white_label",
    max_sub_accounts: int = 100,
    active: bool = True,
) -> Agency:
    """An organisation with the given plan type, limit and state, and its agency key."""
    from tenancy.organisations import create_organisation

    organisation_id, key = await create_organisation(
        pool, f"Agency {uuid.uuid4().hex[:8]}", plan_type, max_sub_accounts, active
    )
    return Agency(organisation_id, key)


async def create_plan(client: Any, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    body.setdefault("slug", f"plan-{uuid.uuid4().hex[:8]}")
    body.setdefault("name", "Plan")
    response = await client.post(PLANS, json=body, headers=headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["plan"]  # type: ignore[no-any-return]


async def create_sub_account(client: Any, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    body.setdefault("email", unique_email("owner"))
    if "name" not in body and "locationID" not in body:
        body["name"] = f"Tenant {uuid.uuid4().hex[:8]}"
    response = await client.post(CREATE, json=body, headers=headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return await response.get_json()  # type: ignore[no-any-return]


async def issue_key(client: Any, headers: dict[str, str], sub_account_id: Any) -> str:
    response = await client.post(f"{SUB_ACCOUNTS}/{sub_account_id}/api-keys", headers=headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["api_key"]  # type: ignore[no-any-return]


async def make_tenant(
    client: Any, agency: Agency, *, name: str | None = None, plan: str | None = None
) -> Tenant:
    """A sub-account of `agency` (on `plan`, if given) and a sub-account key for it."""
    owner = unique_email("owner")
    body: dict[str, Any] = {"email": owner, "name": name or f"Tenant {uuid.uuid4().hex[:8]}"}
    if plan is not None:
        body["plan"] = plan
    created = await create_sub_account(client, agency.headers, **body)
    sub_account_id = uuid.UUID(created["sub_account_id"])
    key = await issue_key(client, agency.headers, sub_account_id)
    return Tenant(
        sub_account_id, agency, key, f"t_{sub_account_id.hex}", created["sub_account_slug"], owner
    )


async def credit(client: Any, tenant: Tenant, amount: Any) -> Any:
    """Credit the sub-account's wallet as its agency does; returns the new balance."""
    response = await client.post(
        f"{SUB_ACCOUNTS}/{tenant.id}/wallet/credit",
        json={"amount": amount, "description": "top-up"},
        headers=tenant.organisation.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["balance"]


_credit = credit  # `priced_tenant` takes an amount named `credit`


async def priced_tenant(
    client: Any, agency: Agency, *, credit: float | None = None, **rebilling: float
) -> Tenant:
    """A sub-account on a plan with these rebilling prices, its wallet credited."""
    plan = await create_plan(client, agency.headers, name="Priced plan", rebilling=rebilling)
    created = await make_tenant(client, agency, plan=plan["slug"])
    if credit is not None:
        await _credit(client, created, credit)
    return created


EMAIL_PRICE = Decimal("0.05")
SMS_PRICE = Decimal("0.02")


async def make_priced_tenant(client: Any, agency: Agency) -> Tenant:
    """A sub-account on a plan that rebills email and SMS at EMAIL_PRICE and SMS_PRICE."""
    return await priced_tenant(
        client, agency, email_per_message=float(EMAIL_PRICE), sms_per_message=float(SMS_PRICE)
    )


async def make_member(client: Any, mailbox: Any, tenant: Tenant) -> uuid.UUID:
    """A user who accepted an invitation to `tenant`: an active member."""
    email = unique_email("member")
    response = await client.post(
        ADD_USER,
        json={"email": email, "role": "sub_account_user", "sub_account_id": str(tenant.id)},
        headers=tenant.organisation.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    text = mailbox.to(email)[-1].get_payload(decode=True).decode()
    token = re.search(r"Invitation token: (\S+)", text).group(1)  # type: ignore[union-attr]
    response = await client.post(ACCEPT, json={"token": token})
    assert response.status_code == 200, await response.get_data(as_text=True)
    return uuid.UUID((await response.get_json())["user_id"])


# --- contacts -----------------------------------------------------------------------------------


async def create_contact(client: Any, tenant: Any, **body: Any) -> str:
    """A contact with exactly `body` (a unique email if it names neither email nor phone)."""
    if "email" not in body and "phone" not in body:
        body["email"] = unique_email("contact")
    response = await client.post(CONTACTS, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["contact_id"])


async def add_contact(
    client: Any,
    tenant: Any,
    *,
    email: str | None = None,
    phone: str | None = None,
    tags: list[str] | None = None,
    first_name: str | None = None,
) -> str:
    """A recipient: a contact by email (unique unless given) or phone, then tagged."""
    body: dict[str, Any] = (
        {"email": email or unique_email("rcpt")} if phone is None else {"phone": phone}
    )
    if email and phone:
        body["email"] = email
    if first_name:
        body["first_name"] = first_name
    contact_id = await create_contact(client, tenant, **body)
    if tags:
        response = await client.post(
            f"{CONTACTS}/{contact_id}/tags", json={"tags": tags}, headers=tenant.headers
        )
        assert response.status_code == 200, await response.get_data(as_text=True)
    return contact_id


async def make_contact(
    client: Any, tenant: Any, phone: str | None = "+14155552671", email: str | None = None
) -> str:
    """A callable contact: named, with a phone (unless None) and a unique email."""
    body: dict[str, Any] = {"name": "Ada Lovelace"}
    if phone is not None:
        body["phone"] = phone
    body["email"] = email or f"ada-{uuid.uuid4().hex[:8]}@example.com"
    return await create_contact(client, tenant, **body)


async def insert_contact(
    pool: asyncpg.Pool, tenant: Any, email: str | None = None, *, phone: str | None = None
) -> uuid.UUID:
    """A contact written straight into the tenant's schema (no API, no events)."""
    async with tenant_transaction(pool, tenant.schema) as conn:
        contact_id: uuid.UUID = await conn.fetchval(
            "INSERT INTO contacts (name, email, phone) VALUES ($1, $2, $3) RETURNING id",
            "Ada Lovelace",
            email or f"ada-{uuid.uuid4().hex[:10]}@example.com",
            phone,
        )
    return contact_id


async def define_custom_field(client: Any, tenant: Any, **body: Any) -> dict[str, Any]:
    """A custom field definition (named after its key unless `name` is given)."""
    body.setdefault("name", body["key"].title())
    response = await client.post(f"{BASE}/custom-fields", json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["custom_field"]  # type: ignore[no-any-return]


async def create_company(client: Any, tenant: Any, name: str = "Acme") -> dict[str, Any]:
    response = await client.post(f"{BASE}/companies", json={"name": name}, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["company"]  # type: ignore[no-any-return]


# --- agents and numbers -------------------------------------------------------------------------


def agent_body(tenant: Any, **overrides: Any) -> dict[str, Any]:
    """A valid create-agent body; an override of `...` drops that field."""
    ours = {"name": "Sales agent", "backcchanneling": True, "recording": True}
    body = create_agent_body(tenant.organisation.id, tenant.id, **(ours | overrides))
    return {key: value for key, value in body.items() if value is not ...}


async def connect(client: Any, tenant: Any, provider: str = "openai") -> None:
    """Connect an LLM provider integration with a made-up key."""
    response = await client.put(
        f"{BASE}/integrations/{provider}",
        json={"api_key": f"sk-{uuid.uuid4().hex}"},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)


async def make_agent(client: Any, tenant: Any, **overrides: Any) -> str:
    await connect(client, tenant)
    response = await client.post(
        "/functions/v1/crm-api/create-agent",
        json=agent_body(tenant, **overrides),
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["id"])


async def import_number(client: Any, tenant: Any, number: str) -> str:
    response = await client.post(
        f"{BASE}/phone-numbers/import", json={"phone_number": number}, headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["phone_number"]["id"])


async def assign(client: Any, tenant: Any, number_id: str, agent_id: str) -> Any:
    """Assign the number to the agent; returns the response (tests check refusals too)."""
    return await client.post(
        f"{BASE}/phone-numbers/{number_id}/agent",
        json={"agent_id": agent_id},
        headers=tenant.headers,
    )


# --- invoices and campaigns ---------------------------------------------------------------------

DUE = "2026-12-31"
ITEMS = [{"item": "Consulting", "quantity": 2, "amount": 50}]
HTML = (
    '<html><body><h1>Hello</h1><p>See <a href="https://example.com/offer?a=1&amp;b=2">'
    "the offer</a>.</p></body></html>"
)


async def create_invoice(
    client: Any, tenant: Any, contact_id: uuid.UUID, **fields: Any
) -> dict[str, Any]:
    body = {"contact_id": str(contact_id), "items": ITEMS, "due_date": DUE, **fields}
    response = await client.post(INVOICES, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["invoice"]  # type: ignore[no-any-return]


async def create_campaign(client: Any, tenant: Any, **fields: Any) -> dict[str, Any]:
    body = {
        "name": "Spring sale",
        "campaign_type": "email",
        "subject": "Spring sale",
        "message_content": HTML,
        **fields,
    }
    response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["campaign"]  # type: ignore[no-any-return]


# --- webhook subscriptions and events -----------------------------------------------------------

CONTACT_EVENT = {
    "sub_account_id": None,
    "contact": {"id": "c1", "tags": ["vip"]},
    "changes": {"tags": {"added": ["vip"], "removed": []}},
}


async def subscribe(
    client: Any, tenant: Any, url: str, events: list[str] | None = None
) -> dict[str, Any]:
    response = await client.post(
        SUBSCRIPTIONS,
        json={"url": url, "events": events or ["contact.updated"]},
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["subscription"]  # type: ignore[no-any-return]


async def emit_event(
    pool: asyncpg.Pool,
    tenant: Any,
    event_type: str = "contact.updated",
    data: dict[str, Any] | None = None,
) -> None:
    async with tenant_transaction(pool, tenant.schema) as conn:
        await emit(conn, event_type, data or {**CONTACT_EVENT, "sub_account_id": tenant.id})


async def emit_target(
    pool: asyncpg.Pool, tenant: Any, url: str, secret: str, data: dict[str, Any]
) -> uuid.UUID:
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await emit_to(conn, await emit(conn, "call.completed", data), url, secret)


# --- a sub-account with something of everything (the tenant operations) ------------------------


@dataclass
class Populated:
    tenant: Tenant
    owner_user_id: uuid.UUID
    plan_slug: str


async def populate(client: Any, pool: asyncpg.Pool) -> Populated:
    """A sub-account on a plan, with a member, wallet credits, a webhook subscription, and a
    contact with a conversation and messages (arrays, jsonb, numeric, an identity column)."""
    agency = await make_agency(pool)
    plan = await create_plan(
        client, agency.headers, slug=f"gold-{uuid.uuid4().hex[:8]}", name="Gold", max_users=5
    )
    owner = unique_email("owner")
    created = await create_sub_account(
        client, agency.headers, email=owner, name="Ops Tenant", plan=plan["slug"]
    )
    sub_account_id = uuid.UUID(created["sub_account_id"])
    key = await issue_key(client, agency.headers, sub_account_id)
    response = await client.post(
        ACCEPT, json={"token": created["invitation_token"], "first_name": "Ada"}
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    owner_user_id = uuid.UUID((await response.get_json())["user_id"])
    tenant = Tenant(
        sub_account_id, agency, key, f"t_{sub_account_id.hex}", created["sub_account_slug"], owner
    )
    for amount in (12.34, 0.66):
        await credit(client, tenant, amount)
    await subscribe(client, tenant, "https://hooks.example.com/in")
    await _conversation(pool, tenant.schema)
    return Populated(tenant, owner_user_id, plan["slug"])


async def _conversation(pool: asyncpg.Pool, schema: str) -> None:
    async with tenant_transaction(pool, schema) as conn:
        company = await conn.fetchval("INSERT INTO companies (name) VALUES ('Acme') RETURNING id")
        contact = await conn.fetchval(
            "INSERT INTO contacts (name, email, tags, custom_field_values, company_id) "
            "VALUES ('Grace', 'grace@example.com', ARRAY['vip', 'a \"quoted\" tag'], "
            '\'{"score": 0.1, "big": 12345678901234567890.123, "nested": [1, null]}\'::jsonb,'
            " $1) RETURNING id",
            company,
        )
        conversation = await conn.fetchval(
            "INSERT INTO conversations (contact_id, last_message_at) VALUES ($1, now()) "
            "RETURNING id",
            contact,
        )
        for content in ("hello", "again"):
            await conn.execute(
                "INSERT INTO messages (conversation_id, direction, sender_type, message_type, "
                "content, status) VALUES ($1, 'outbound', 'user', 'sms', $2, 'sent')",
                conversation,
                content,
            )


async def send_message(
    client: Any, tenant: Any, contact_id: str, content: str = "On my way", message_type: str = "sms"
) -> dict[str, Any]:
    """POST /contacts/{id}/messages; the message as answered (201)."""
    response = await client.post(
        f"{BASE}/contacts/{contact_id}/messages",
        json={"message_type": message_type, "content": content},
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["message"]  # type: ignore[no-any-return]


# --- tools --------------------------------------------------------------------------------------

TOOLS = f"{BASE}/tools"


def tool_body(**overrides: Any) -> dict[str, Any]:
    """A valid http tool (a unique name); an override of `...` drops that field."""
    body: dict[str, Any] = {
        "name": f"lookup_{uuid.uuid4().hex[:8]}",
        "type": "http",
        "description": "Look up the contact's order status.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "The order number"}},
            "required": ["order_id"],
        },
        "config": {
            "url": "https://tools.example.com/orders",
            "headers": {"Authorization": "Bearer tool-token"},
        },
    }
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not ...}


async def make_tool(client: Any, tenant: Any, **overrides: Any) -> dict[str, Any]:
    """A tool of the sub-account, as POST /tools answers it."""
    response = await client.post(TOOLS, json=tool_body(**overrides), headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["tool"]  # type: ignore[no-any-return]


# --- calendars and appointments -----------------------------------------------------------------

CALENDARS = f"{BASE}/calendars"
APPOINTMENTS = f"{BASE}/appointments"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
ALL_DAY = [{"day": day, "start": "00:00", "end": "24:00"} for day in WEEKDAYS]


async def create_calendar(client: Any, tenant: Any, **fields: Any) -> dict[str, Any]:
    """A calendar (UTC, bookable all day every day, 30-minute slots, no notice unless given)."""
    body = {
        "name": "Consultations",
        "timezone": "UTC",
        "availability": ALL_DAY,
        "min_notice_minutes": 0,
        **fields,
    }
    response = await client.post(CALENDARS, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["calendar"]  # type: ignore[no-any-return]


async def free_slots(
    client: Any, tenant: Any, calendar_id: str, from_day: str, to_day: str | None = None
) -> list[dict[str, Any]]:
    response = await client.get(
        f"{CALENDARS}/{calendar_id}/free-slots",
        query_string={"from": from_day, "to": to_day or from_day},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["slots"]  # type: ignore[no-any-return]


async def book(
    client: Any, tenant: Any, calendar_id: str, contact_id: str, start: str, **fields: Any
) -> dict[str, Any]:
    """POST /appointments (asserting 201); the appointment."""
    body = {"calendar_id": calendar_id, "contact_id": contact_id, "start": start, **fields}
    response = await client.post(APPOINTMENTS, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["appointment"]  # type: ignore[no-any-return]
