"""GET /webhooks/inbound/events: what was emitted in the last 30 days, delivered or not, newest
first, filtered by type and an exclusive `since` (CONTRACT 7, 9)."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import create_contact
from tests.helpers import expect_error, stored_events, tenant_sql

EVENTS = "/webhooks/inbound/events"


async def feed(client, tenant, query=""):
    response = await client.get(f"{EVENTS}{query}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def three_events(client, tenant):
    """contact.created, contact.updated, contact.deleted of one contact, in that order."""
    contact_id = await create_contact(client, tenant)
    await client.post(
        f"/webhooks/inbound/contacts/{contact_id}/tags",
        json={"tags": ["vip"]},
        headers=tenant.headers,
    )
    await client.delete(f"/webhooks/inbound/contacts/{contact_id}", headers=tenant.headers)
    return contact_id


async def test_feed_lists_every_event_newest_first_without_subscribers(client, pool, tenant):
    contact_id = await three_events(client, tenant)
    body = await feed(client, tenant)
    assert body["status"] == "success"
    assert [event["type"] for event in body["events"]] == [
        "contact.deleted",
        "contact.updated",
        "contact.created",
    ]
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (3, 50, 0, False)
    deleted = body["events"][0]
    assert list(deleted) == ["id", "type", "timestamp", "data"]
    assert deleted["id"].startswith("msg_") and deleted["timestamp"].endswith("Z")
    assert deleted["data"] == {"sub_account_id": str(tenant.id), "contact_id": contact_id}
    stored = {event["id"] for event in await stored_events(pool, tenant)}
    assert {event["id"] for event in body["events"]} == stored


async def test_feed_filters_by_type(client, tenant):
    await three_events(client, tenant)
    only = await feed(client, tenant, "?type=contact.updated")
    assert [event["type"] for event in only["events"]] == ["contact.updated"]
    assert only["total"] == 1
    two = await feed(client, tenant, "?type=contact.created&type=contact.deleted")
    assert [event["type"] for event in two["events"]] == ["contact.deleted", "contact.created"]
    assert (await feed(client, tenant, "?type=invoice.paid"))["events"] == []


async def test_feed_since_is_exclusive(client, tenant):
    await three_events(client, tenant)
    [newest, middle, oldest] = (await feed(client, tenant))["events"]
    after = await feed(client, tenant, f"?since={middle['timestamp']}")
    assert [event["id"] for event in after["events"]] == [newest["id"]]
    offset = oldest["timestamp"].replace("Z", "+00:00").replace("+", "%2B")
    assert len((await feed(client, tenant, f"?since={offset}"))["events"]) == 2
    naive = oldest["timestamp"].removesuffix("Z")
    assert len((await feed(client, tenant, f"?since={naive}"))["events"]) == 2


async def test_feed_leaves_out_events_past_30_days(client, pool, tenant):
    await three_events(client, tenant)
    await tenant_sql(
        pool,
        tenant,
        "UPDATE events SET timestamp = now() - interval '31 days' WHERE type = 'contact.created'",
    )
    body = await feed(client, tenant)
    assert [event["type"] for event in body["events"]] == ["contact.deleted", "contact.updated"]
    assert body["total"] == 2


async def test_feed_paginates(client, tenant):
    await three_events(client, tenant)
    whole = (await feed(client, tenant))["events"]
    page = await feed(client, tenant, "?limit=2&offset=1")
    assert [event["id"] for event in page["events"]] == [event["id"] for event in whole[1:]]
    assert (page["total"], page["has_more"]) == (3, False)
    assert (await feed(client, tenant, "?limit=1"))["has_more"] is True
    assert (await feed(client, tenant, "?offset=5"))["events"] == []


@pytest.mark.parametrize(
    "query",
    [
        "since=yesterday",
        "since=",
        "since=2026-13-01T00:00:00Z",
        "since=1700000000",
        "since=9999-12-31T23:59:59-23:59",
        "since=0001-01-01T00:00:00%2B23:59",
        "type=contact.exploded",
        "type=",
        "type=*",
        "limit=0",
        "limit=101",
        "limit=x",
        "offset=-1",
    ],
)
async def test_feed_bad_query_is_400(client, tenant, query):
    response = await client.get(f"{EVENTS}?{query}", headers=tenant.headers)
    await expect_error(response, 400, "validation_error")


async def test_feed_shows_only_the_callers_events(client, tenant, tenant_second):
    await three_events(client, tenant_second)
    assert (await feed(client, tenant))["events"] == []


async def test_feed_without_key_is_401(client):
    response = await client.get(EVENTS)
    assert response.status_code == 401


async def test_feed_event_data_is_the_sent_body_data(client, pool, tenant):
    contact_id = await create_contact(client, tenant, first_name="Ada")
    [event] = (await feed(client, tenant))["events"]
    [row] = await tenant_sql(pool, tenant, "SELECT id FROM contacts")
    assert str(row["id"]) == contact_id == event["data"]["contact"]["id"]
    assert uuid.UUID(event["data"]["sub_account_id"]) == tenant.id
