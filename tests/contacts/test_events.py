"""contact.updated: fired (signed, delivered, retried) only when a contact's tag set changes."""

from __future__ import annotations

import json

import pytest

from integrations.webhooks import new_secret
from tests.factories import CONTACTS, create_contact
from tests.helpers import get_contact, tenant_sql
from tests.receiver import signature_verifies

SUBSCRIPTIONS = "/webhooks/inbound/webhook-subscriptions"


@pytest.fixture(autouse=True)
async def cancel_undelivered(pool, tenant):
    """Events a test leaves undelivered would keep the next burst worker retrying for minutes."""
    yield
    await tenant_sql(
        pool,
        tenant,
        "UPDATE webhook_deliveries SET status = 'cancelled', "
        "completed_at = now() WHERE status = 'pending'",
    )


async def subscribe(client, tenant, url):
    response = await client.post(
        SUBSCRIPTIONS, json={"url": url, "events": ["contact.updated"]}, headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["subscription"]


async def events(pool, tenant):
    """The contact.updated messages stored for delivery, oldest first (bodies parsed)."""
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT body FROM webhook_deliveries "
        "WHERE event_type = 'contact.updated' "
        "ORDER BY created_at, id",
    )
    return [json.loads(row["body"]) for row in rows]


async def add_tags(client, tenant, contact_id, tags):
    response = await client.post(
        f"{CONTACTS}/{contact_id}/tags", json={"tags": tags}, headers=tenant.headers
    )
    assert response.status_code == 200
    return response


async def remove_tags(client, tenant, contact_id, tags):
    response = await client.delete(
        f"{CONTACTS}/{contact_id}/tags", json={"tags": tags}, headers=tenant.headers
    )
    assert response.status_code == 200
    return response


async def test_add_tags_records_one_event_with_the_contact_and_changes(
    client, pool, tenant, receiver
):
    await subscribe(client, tenant, receiver.url)
    contact_id = await create_contact(client, tenant)
    await add_tags(client, tenant, contact_id, ["vip"])
    await add_tags(client, tenant, contact_id, ["VIP", "Lead"])
    [first, second] = await events(pool, tenant)
    assert first["type"] == "contact.updated"
    assert first["data"]["sub_account_id"] == str(tenant.id)
    assert first["data"]["changes"] == {"tags": {"added": ["vip"], "removed": []}}
    assert second["data"]["changes"] == {"tags": {"added": ["lead"], "removed": []}}
    assert second["data"]["contact"] == await get_contact(client, tenant, contact_id)


async def test_remove_tags_records_the_removed_ones(client, pool, tenant, receiver):
    await subscribe(client, tenant, receiver.url)
    contact_id = await create_contact(client, tenant)
    await add_tags(client, tenant, contact_id, ["a", "b", "c"])
    await remove_tags(client, tenant, contact_id, ["B", "zzz"])
    last = (await events(pool, tenant))[-1]
    assert last["data"]["changes"] == {"tags": {"added": [], "removed": ["b"]}}
    assert last["data"]["contact"]["tags"] == ["a", "c"]


async def test_unchanged_set_records_no_event(client, pool, tenant, receiver):
    await subscribe(client, tenant, receiver.url)
    contact_id = await create_contact(client, tenant)
    await add_tags(client, tenant, contact_id, ["a", "b"])
    await add_tags(client, tenant, contact_id, ["b", "A"])
    await remove_tags(client, tenant, contact_id, ["not-there"])
    await client.patch(
        f"{CONTACTS}/{contact_id}", json={"tags": ["B", "a"]}, headers=tenant.headers
    )
    await client.patch(
        f"{CONTACTS}/{contact_id}", json={"address": "no tag change"}, headers=tenant.headers
    )
    assert len(await events(pool, tenant)) == 1


async def test_patch_tag_replacement_records_added_and_removed(client, pool, tenant, receiver):
    await subscribe(client, tenant, receiver.url)
    contact_id = await create_contact(client, tenant)
    await add_tags(client, tenant, contact_id, ["a", "b"])
    response = await client.patch(
        f"{CONTACTS}/{contact_id}", json={"tags": ["b", "c"]}, headers=tenant.headers
    )
    assert response.status_code == 200
    last = (await events(pool, tenant))[-1]
    assert last["data"]["changes"] == {"tags": {"added": ["c"], "removed": ["a"]}}
    assert last["data"]["contact"] == await get_contact(client, tenant, contact_id)


async def test_refused_change_records_no_event(client, pool, tenant, receiver):
    await subscribe(client, tenant, receiver.url)
    contact_id = await create_contact(client, tenant)
    response = await client.patch(
        f"{CONTACTS}/{contact_id}", json={"tags": ["new"], "phone": "bad"}, headers=tenant.headers
    )
    assert response.status_code == 400
    assert await events(pool, tenant) == []


async def test_delivered_event_signature_verifies_with_the_subscription_secret(
    client, pool, tenant, receiver, run_worker
):
    subscription = await subscribe(client, tenant, receiver.url)
    contact_id = await create_contact(client, tenant)
    await add_tags(client, tenant, contact_id, ["vip"])
    await run_worker()
    [(headers, body)] = receiver.requests
    assert signature_verifies(subscription["secret"], headers, body)
    assert not signature_verifies(new_secret(), headers, body)
    event = json.loads(body)
    assert event["type"] == "contact.updated"
    assert event["data"]["contact"]["id"] == contact_id
    assert event["data"]["changes"]["tags"]["added"] == ["vip"]


async def test_no_event_is_delivered_for_an_unchanged_set(
    client, pool, tenant, receiver, run_worker
):
    await subscribe(client, tenant, receiver.url)
    contact_id = await create_contact(client, tenant)
    await tenant_sql(pool, tenant, "UPDATE contacts SET tags = ARRAY['vip']")
    await add_tags(client, tenant, contact_id, ["vip"])
    await remove_tags(client, tenant, contact_id, ["other"])
    await run_worker()
    assert receiver.requests == []


async def test_failing_receiver_is_retried_then_succeeds(
    client, pool, tenant, receiver, run_worker
):
    subscription = await subscribe(client, tenant, receiver.url)
    receiver.statuses = [500, 503]
    contact_id = await create_contact(client, tenant)
    await add_tags(client, tenant, contact_id, ["vip"])
    await run_worker()
    assert len(receiver.requests) == 3
    assert len({headers["webhook-id"] for headers, _ in receiver.requests}) == 1
    assert all(
        signature_verifies(subscription["secret"], headers, body)
        for headers, body in receiver.requests
    )
    rows = await tenant_sql(pool, tenant, "SELECT status, attempt_count FROM webhook_deliveries")
    assert [tuple(row) for row in rows] == [("delivered", 3)]
