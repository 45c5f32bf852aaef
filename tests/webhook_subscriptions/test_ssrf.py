"""SSRF through the API: loopback written in any form is refused when a webhook URL is created,
and a name that turns into loopback after creation is refused when sending. A listener on
loopback counts the connections it gets: always none.

`SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS` is off here (the suite turns it on for its receivers).
Name resolution for `*.switchboard.test` is answered by a fake resolver at the socket level,
below our own code, so the guard's real lookup path runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import SUBSCRIPTIONS, agent_body, emit_event, subscribe
from tests.helpers import attempts, deliveries, error_of

AGENT = "/functions/v1/crm-api/create-agent"

# Every one of these is 127.0.0.1 or ::1 to some resolver or HTTP client.
LOOPBACK_FORMS = [
    "127.0.0.1.",
    "127.0.0.1%09",
    "127.0.0.1%20",
    "127.0.0.1%2e",
    "127.0.0.1..",
    "127.1",
    "2130706433",
    "017700000001",
    "0x7f000001",
    "0x7f.1",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:7f00:1]",
    "localhost",
    "localhost.",
    "LOCALHOST",
    "api.localhost.",
    "0",
    "0.0.0.0",
]
CONTROL_CHARACTER_URLS = [
    "https://example.com/a\tb",
    "https://example.com/x\n",
    "https://exa\x00mple.com/",
    "https://example.com/\r\nX-Injected: 1",
    "\x1bhttps://example.com/",
    "https://example.com/\x7f",
]
# Not URIs (RFC 3986; the document says `format: uri`): a client percent-encodes these
# characters and writes an international host as xn--.
NOT_URIS = [
    "hTtP://\u00d0",
    "https://ex\u00e4mple.com/hook",
    "https://example.com/a b",
    "https://example.com/caf\u00e9",
    "https://example.com/\u00a0",
]


@pytest.fixture
def private_off(app: Any, monkeypatch: pytest.MonkeyPatch, worker_env: Any) -> None:
    settings = app.app.config["SETTINGS"]
    monkeypatch.setitem(
        app.app.config, "SETTINGS", settings.model_copy(update={"allow_private_webhooks": False})
    )
    worker_env(SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS="false")


async def subscription_count(client: Any, tenant: Any) -> int:
    listed = await client.get(SUBSCRIPTIONS, headers=tenant.headers)
    return int((await listed.get_json())["total"])


@pytest.mark.parametrize("host", LOOPBACK_FORMS)
async def test_subscription_to_loopback_in_any_form_is_refused(
    client, tenant, receiver, private_off, host
):
    url = f"http://{host}:{receiver.port}/hook"
    response = await client.post(
        SUBSCRIPTIONS, json={"url": url, "events": ["contact.updated"]}, headers=tenant.headers
    )
    assert (await error_of(response, 400))["code"] == "webhook_url_not_allowed"
    assert await subscription_count(client, tenant) == 0
    assert receiver.connections == 0


@pytest.mark.parametrize("host", LOOPBACK_FORMS)
async def test_agent_webhook_to_loopback_in_any_form_is_refused(
    client, tenant, receiver, private_off, host
):
    url = f"http://{host}:{receiver.port}/hook"
    body = agent_body(tenant, webhook=True, webhook_url=url)
    response = await client.post(AGENT, json=body, headers=tenant.headers)
    assert (await error_of(response, 400))["code"] == "webhook_url_not_allowed"
    listed = await client.get("/webhooks/inbound/agents", headers=tenant.headers)
    assert (await listed.get_json())["total"] == 0
    assert receiver.connections == 0


@pytest.mark.parametrize("url", CONTROL_CHARACTER_URLS + NOT_URIS)
async def test_subscription_url_with_a_control_character_or_not_a_uri_is_400(client, tenant, url):
    response = await client.post(
        SUBSCRIPTIONS, json={"url": url, "events": ["contact.updated"]}, headers=tenant.headers
    )
    error = await error_of(response, 400)
    assert error["code"] == "validation_error"
    assert [detail["field"] for detail in error["details"]] == ["url"]
    assert await subscription_count(client, tenant) == 0


@pytest.mark.parametrize("url", CONTROL_CHARACTER_URLS + NOT_URIS)
async def test_agent_webhook_url_with_a_control_character_or_not_a_uri_is_400(client, tenant, url):
    body = agent_body(tenant, webhook=True, webhook_url=url)
    response = await client.post(AGENT, json=body, headers=tenant.headers)
    error = await error_of(response, 400)
    assert error["code"] == "validation_error"
    assert "webhook_url" in [detail["field"] for detail in error["details"]]


async def test_name_that_resolves_to_loopback_at_send_is_refused_without_connecting(
    client, pool, tenant, receiver, private_off, dns, run_worker
):
    # Given a name that is public when the subscription is created...
    dns("hooks.switchboard.test", "93.184.216.34")
    await subscribe(client, tenant, f"http://hooks.switchboard.test:{receiver.port}/hook")
    # ...and points at loopback by the time the event is sent (DNS rebinding).
    dns("hooks.switchboard.test", "127.0.0.1")
    await emit_event(pool, tenant)
    await run_worker()
    assert receiver.connections == 0
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"]) == ("failed", 1)
    [attempt] = await attempts(pool, tenant, delivery["id"])
    assert attempt["status_code"] is None
    assert attempt["error"].startswith("target_not_allowed")


async def test_name_that_did_not_resolve_at_create_and_is_loopback_at_send_is_refused(
    client, pool, tenant, receiver, private_off, dns, run_worker
):
    await subscribe(client, tenant, f"http://later.switchboard.test:{receiver.port}/hook")
    dns("later.switchboard.test", "::1")
    await emit_event(pool, tenant)
    await run_worker()
    assert receiver.connections == 0
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"]) == ("failed", 1)


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1.", "127.0.0.1%09", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "localhost."],
)
async def test_loopback_target_stored_while_allowed_is_refused_at_send(
    app, client, pool, tenant, receiver, run_worker, worker_env, host
):
    # Created while private targets were allowed; the setting is off when the worker sends.
    await subscribe(client, tenant, f"http://{host}:{receiver.port}/hook")
    worker_env(SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS="false")
    await emit_event(pool, tenant)
    await run_worker()
    assert receiver.connections == 0
    [delivery] = await deliveries(pool, tenant)
    assert delivery["status"] == "failed"
    [attempt] = await attempts(pool, tenant, delivery["id"])
    assert attempt["error"].startswith("target_not_allowed")
