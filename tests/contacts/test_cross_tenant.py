"""A second sub-account's ids behave as missing on every operation here; nothing of theirs changes.

Also: every operation answers 429 in the envelope when the key is over its rate limit.
"""

from __future__ import annotations

import pytest

from tests.factories import BASE, CONTACTS, create_contact
from tests.helpers import error_code, get_contact


@pytest.fixture
async def theirs(client, tenant_second):
    """tenant_second's contact with a tag and a note: (contact_id, note_id)."""
    contact_id = await create_contact(client, tenant_second, first_name="Theirs")
    await client.post(
        f"{CONTACTS}/{contact_id}/tags", json={"tag": "keep"}, headers=tenant_second.headers
    )
    response = await client.post(
        f"{CONTACTS}/{contact_id}/notes", json={"content": "theirs"}, headers=tenant_second.headers
    )
    return contact_id, (await response.get_json())["note"]["id"]


def id_operations(contact_id, note_id):
    return [
        ("GET", f"{CONTACTS}/{contact_id}", None),
        ("PATCH", f"{CONTACTS}/{contact_id}", {"first_name": "Mine"}),
        ("DELETE", f"{CONTACTS}/{contact_id}", None),
        ("POST", f"{CONTACTS}/{contact_id}/tags", {"tag": "mine"}),
        ("DELETE", f"{CONTACTS}/{contact_id}/tags", {"tag": "keep"}),
        ("POST", f"{CONTACTS}/{contact_id}/notes", {"content": "mine"}),
        ("GET", f"{CONTACTS}/{contact_id}/notes", None),
        ("DELETE", f"{CONTACTS}/{contact_id}/notes/{note_id}", None),
    ]


async def test_other_sub_accounts_ids_are_404_on_every_operation(
    client, tenant, tenant_second, theirs
):
    contact_id, note_id = theirs
    for method, url, body in id_operations(contact_id, note_id):
        kwargs = {"json": body} if body is not None else {}
        response = await client.open(url, method=method, headers=tenant.headers, **kwargs)
        assert response.status_code == 404, (method, url)
        assert await error_code(response) == "not_found"
    contact = await get_contact(client, tenant_second, contact_id)
    assert (contact["first_name"], contact["tags"]) == ("Theirs", ["keep"])
    response = await client.get(f"{CONTACTS}/{contact_id}/notes", headers=tenant_second.headers)
    assert (await response.get_json())["note_count"] == 1


async def test_own_contact_with_other_sub_accounts_note_id_is_404(client, tenant, theirs):
    mine = await create_contact(client, tenant)
    response = await client.delete(f"{CONTACTS}/{mine}/notes/{theirs[1]}", headers=tenant.headers)
    assert response.status_code == 404


async def test_lists_and_summary_show_only_own_records(client, tenant, theirs):
    body = await (await client.get(CONTACTS, headers=tenant.headers)).get_json()
    assert (body["total"], body["contacts"]) == (0, [])
    body = await (await client.get(f"{BASE}/tags", headers=tenant.headers)).get_json()
    assert body["tags"] == []


async def test_create_does_not_match_other_sub_accounts_contact(client, tenant, tenant_second):
    their_id = await create_contact(client, tenant_second, email="shared@example.com")
    response = await client.post(
        CONTACTS, json={"email": "shared@example.com"}, headers=tenant.headers
    )
    assert response.status_code == 201
    assert (await response.get_json())["contact_id"] != their_id


async def test_over_the_rate_limit_every_operation_is_429(client, tenant):
    from cli.wiring import build_app as create_app
    from tenancy.settings import Settings

    contact_id = await create_contact(client, tenant)
    operations = [
        ("GET", CONTACTS, None),
        ("POST", CONTACTS, {"email": "x@example.com"}),
        ("GET", f"{BASE}/tags", None),
    ] + id_operations(contact_id, contact_id)
    application = create_app(Settings(rate_limit_requests=0))
    async with application.test_app() as limited_app:
        limited = limited_app.test_client()
        for method, url, body in operations:
            kwargs = {"json": body} if body is not None else {}
            response = await limited.open(url, method=method, headers=tenant.headers, **kwargs)
            assert response.status_code == 429, (method, url)
            assert await error_code(response) == "rate_limited"
    assert (await get_contact(client, tenant, contact_id))["tags"] == []
