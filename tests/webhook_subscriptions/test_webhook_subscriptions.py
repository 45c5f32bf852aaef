"""POST, GET and DELETE /webhooks/inbound/webhook-subscriptions."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import SUBSCRIPTIONS, subscribe


async def test_create_subscription_returns_id_url_events_and_secret(client, tenant):
    response = await client.post(
        SUBSCRIPTIONS,
        json={"url": "https://example.com/hooks", "events": ["contact.updated"]},
        headers=tenant.headers,
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success"
    subscription = body["subscription"]
    uuid.UUID(subscription["id"])
    assert subscription["url"] == "https://example.com/hooks"
    assert subscription["events"] == ["contact.updated"]
    assert subscription["secret"].startswith("whsec_")
    assert subscription["is_active"] is True


@pytest.mark.parametrize(
    "event",
    [
        "contact.created",
        "contact.updated",
        "contact.deleted",
        "contact.consent_updated",
        "message.received",
        "message.status_updated",
        "call.completed",
        "call.failed",
        "campaign.completed",
        "invoice.paid",
        "*",
    ],
)
async def test_create_subscription_takes_every_catalog_event_and_star(client, tenant, event):
    subscription = await subscribe(client, tenant, "https://example.com/h", [event])
    assert subscription["events"] == [event]


async def test_create_subscription_dedupes_events(client, tenant):
    subscription = await subscribe(
        client,
        tenant,
        "https://example.com/h",
        ["call.completed", "contact.updated", "call.completed"],
    )
    assert subscription["events"] == ["call.completed", "contact.updated"]


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://example.com/x", "events": ["contact.updated"]},
        {"url": "not a url", "events": ["contact.updated"]},
        {"url": "https:///nohost", "events": ["contact.updated"]},
        {"url": "https://example.com/x", "events": ["contact.exploded"]},
        {"url": "https://example.com/x", "events": ["contact.*"]},
        {"url": "https://example.com/x", "events": []},
        {"url": "https://example.com/x", "events": "contact.updated"},
        {"url": 5, "events": ["contact.updated"]},
        {"events": ["contact.updated"]},
        {"url": "https://example.com/x"},
    ],
)
async def test_create_subscription_invalid_body_is_400(client, tenant, body):
    response = await client.post(SUBSCRIPTIONS, json=body, headers=tenant.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "validation_error"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://192.168.0.10/",
    ],
)
async def test_create_subscription_private_target_is_400_when_not_allowed(
    app, client, tenant, monkeypatch, url
):
    settings = app.app.config["SETTINGS"]
    monkeypatch.setitem(
        app.app.config, "SETTINGS", settings.model_copy(update={"allow_private_webhooks": False})
    )
    response = await client.post(
        SUBSCRIPTIONS, json={"url": url, "events": ["contact.updated"]}, headers=tenant.headers
    )
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "webhook_url_not_allowed"
    listed = await client.get(SUBSCRIPTIONS, headers=tenant.headers)
    assert (await listed.get_json())["total"] == 0


async def test_create_subscription_private_target_allowed_by_setting(client, tenant):
    subscription = await subscribe(client, tenant, "http://127.0.0.1:9/hook")
    assert subscription["url"] == "http://127.0.0.1:9/hook"


async def test_create_subscription_without_key_is_401(client):
    response = await client.post(
        SUBSCRIPTIONS, json={"url": "https://example.com/x", "events": ["contact.updated"]}
    )
    assert response.status_code == 401


async def test_list_subscriptions_newest_first_without_secret(client, tenant):
    first = await subscribe(client, tenant, "https://example.com/1")
    second = await subscribe(client, tenant, "https://example.com/2", ["call.completed"])
    response = await client.get(SUBSCRIPTIONS, headers=tenant.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert [s["id"] for s in body["subscriptions"]] == [second["id"], first["id"]]
    assert body["subscriptions"][0]["events"] == ["call.completed"]
    assert all("secret" not in s for s in body["subscriptions"])
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (2, 50, 0, False)


async def test_list_subscriptions_paginates(client, tenant):
    for n in range(3):
        await subscribe(client, tenant, f"https://example.com/{n}")
    response = await client.get(f"{SUBSCRIPTIONS}?limit=2&offset=1", headers=tenant.headers)
    body = await response.get_json()
    assert len(body["subscriptions"]) == 2
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (3, 2, 1, False)
    response = await client.get(f"{SUBSCRIPTIONS}?limit=1", headers=tenant.headers)
    assert (await response.get_json())["has_more"] is True


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=101", "limit=-1", "limit=x", "offset=-1", "offset=x"]
)
async def test_list_subscriptions_bad_paging_is_400(client, tenant, query):
    response = await client.get(f"{SUBSCRIPTIONS}?{query}", headers=tenant.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "validation_error"


async def test_list_subscriptions_shows_only_own(client, tenant, tenant_second):
    await subscribe(client, tenant_second, "https://example.com/other")
    response = await client.get(SUBSCRIPTIONS, headers=tenant.headers)
    assert (await response.get_json())["subscriptions"] == []


async def test_delete_subscription(client, tenant):
    subscription = await subscribe(client, tenant, "https://example.com/x")
    response = await client.delete(f"{SUBSCRIPTIONS}/{subscription['id']}", headers=tenant.headers)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "deleted": True,
        "subscription_id": subscription["id"],
    }
    listed = await client.get(SUBSCRIPTIONS, headers=tenant.headers)
    assert (await listed.get_json())["total"] == 0


async def test_delete_subscription_twice_is_404(client, tenant):
    subscription = await subscribe(client, tenant, "https://example.com/x")
    await client.delete(f"{SUBSCRIPTIONS}/{subscription['id']}", headers=tenant.headers)
    response = await client.delete(f"{SUBSCRIPTIONS}/{subscription['id']}", headers=tenant.headers)
    assert response.status_code == 404
    assert (await response.get_json())["error"]["code"] == "not_found"


async def test_delete_subscription_unknown_is_404(client, tenant):
    response = await client.delete(f"{SUBSCRIPTIONS}/{uuid.uuid4()}", headers=tenant.headers)
    assert response.status_code == 404


async def test_delete_subscription_id_not_uuid_is_400(client, tenant):
    response = await client.delete(f"{SUBSCRIPTIONS}/nope", headers=tenant.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "invalid_uuid"


async def test_delete_subscription_of_another_tenant_is_404(client, tenant, tenant_second):
    theirs = await subscribe(client, tenant_second, "https://example.com/theirs")
    response = await client.delete(f"{SUBSCRIPTIONS}/{theirs['id']}", headers=tenant.headers)
    assert response.status_code == 404
    listed = await client.get(SUBSCRIPTIONS, headers=tenant_second.headers)
    assert [s["id"] for s in (await listed.get_json())["subscriptions"]] == [theirs["id"]]
