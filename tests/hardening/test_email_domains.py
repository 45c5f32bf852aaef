"""Which email domains the API takes, the same on every operation (docs/decisions.md): the
reserved example domains (example.com, .org, .net) are ordinary domains and accepted; the
special-use ones that can never receive mail (.test, .local, .localhost, .invalid, .onion,
.arpa) are refused. The demo that `switchboard dev` makes uses an address the API accepts."""

from __future__ import annotations

import uuid

import pytest

from cli.main import DEMO_OWNER_EMAIL
from tests.factories import ADD_USER, CREATE, unique_email
from tests.helpers import count_sub_accounts

CONTACTS = "/webhooks/inbound/contacts"


async def test_the_demo_owner_address_is_accepted_by_the_api_it_demonstrates(client, agency):
    response = await client.post(
        CREATE, json={"email": DEMO_OWNER_EMAIL, "name": "Demo"}, headers=agency.headers
    )
    assert response.status_code == 201


@pytest.mark.parametrize("domain", ["example.com", "example.org", "mail.example.net"])
async def test_reserved_example_domains_are_accepted_everywhere(client, agency, tenant, domain):
    address = f"someone.{uuid.uuid4().hex[:8]}@{domain}"
    created = await client.post(
        CREATE, json={"email": address, "name": "Example"}, headers=agency.headers
    )
    assert created.status_code == 201
    invited = await client.post(
        ADD_USER,
        json={"email": address, "role": "sub_account_user", "sub_account_id": str(tenant.id)},
        headers=tenant.organisation.headers,
    )
    assert invited.status_code == 201
    contact = await client.post(CONTACTS, json={"email": address}, headers=tenant.headers)
    assert contact.status_code == 201


@pytest.mark.parametrize(
    "domain",
    ["demo.test", "demo.switchboard.local", "localhost", "x.invalid", "y.onion", "in-addr.arpa"],
)
async def test_special_use_domains_are_refused_everywhere(client, agency, tenant, pool, domain):
    address = f"someone@{domain}"
    before = await count_sub_accounts(pool, agency.id)
    created = await client.post(
        CREATE, json={"email": address, "name": "Special"}, headers=agency.headers
    )
    assert created.status_code == 400
    assert await count_sub_accounts(pool, agency.id) == before
    invited = await client.post(
        ADD_USER,
        json={"email": address, "role": "sub_account_user", "sub_account_id": str(tenant.id)},
        headers=tenant.organisation.headers,
    )
    assert invited.status_code == 400
    # A contact's unusable email is dropped on create (SPEC), so with nothing else it is 400.
    contact = await client.post(CONTACTS, json={"email": address}, headers=tenant.headers)
    assert contact.status_code == 400
    assert (await contact.get_json())["error"]["code"] == "contacts_email_or_phone_required"
    patched = await client.post(
        CONTACTS, json={"email": unique_email("ok")}, headers=tenant.headers
    )
    contact_id = (await patched.get_json())["contact_id"]
    refused = await client.patch(
        f"{CONTACTS}/{contact_id}", json={"email": address}, headers=tenant.headers
    )
    assert refused.status_code == 400
