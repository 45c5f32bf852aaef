"""URLs a client registers carry no user name or password (CONTRACT 18a "References hold"): each
URL field (webhook subscriptions, http tools on create and PATCH, agents' post-call webhook on
create and PATCH) answers 400 `validation_error` naming the field, without the password in the
answer, and keeps nothing. An `@` outside the authority (path, query) is no user name."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.factories import (
    SUBSCRIPTIONS,
    TOOLS,
    agent_body,
    connect,
    make_agent,
    make_tool,
    tool_body,
)
from tests.helpers import error_of, tenant_sql

AGENT = "/functions/v1/crm-api/create-agent"
AGENTS = "/webhooks/inbound/agents"
PASSWORD = "hunter2-secret"
WITH_USERINFO = [
    f"https://ada:{PASSWORD}@hooks.example.com/hook",
    f"https://:{PASSWORD}@hooks.example.com/hook",
    "https://ada@hooks.example.com/hook",
    "https://@hooks.example.com/hook",
    f"http://ada:{PASSWORD}@93.184.216.34:8080/hook",
    f"HTTPS://ada:{PASSWORD}@hooks.example.com",
]


async def _nothing(client: Any, tenant: Any) -> str:
    return ""


async def _connected(client: Any, tenant: Any) -> str:
    await connect(client, tenant)
    return ""


async def _a_tool(client: Any, tenant: Any) -> str:
    return str((await make_tool(client, tenant))["id"])


async def _subscription(client: Any, tenant: Any, _: str, url: str) -> Any:
    body = {"url": url, "events": ["contact.updated"]}
    return await client.post(SUBSCRIPTIONS, json=body, headers=tenant.headers)


async def _tool_create(client: Any, tenant: Any, _: str, url: str) -> Any:
    return await client.post(TOOLS, json=tool_body(config={"url": url}), headers=tenant.headers)


async def _tool_patch(client: Any, tenant: Any, tool_id: str, url: str) -> Any:
    body = {"config": {"url": url}}
    return await client.patch(f"{TOOLS}/{tool_id}", json=body, headers=tenant.headers)


async def _agent_create(client: Any, tenant: Any, _: str, url: str) -> Any:
    body = agent_body(tenant, webhook=True, webhook_url=url)
    return await client.post(AGENT, json=body, headers=tenant.headers)


async def _agent_patch(client: Any, tenant: Any, agent_id: str, url: str) -> Any:
    body = {"webhook": True, "webhook_url": url}
    return await client.patch(f"{AGENTS}/{agent_id}", json=body, headers=tenant.headers)


SUBSCRIPTION_URLS = "SELECT url FROM webhook_subscriptions"
TOOL_URLS = "SELECT config ->> 'url' AS url FROM tools"
AGENT_URLS = "SELECT webhook_url AS url FROM agents"

# Each URL field: what exists before (its id), how the client sends a URL there, the field the
# answer names, and the URLs that field holds in the database.
FIELDS = {
    "subscription": (_nothing, _subscription, "url", SUBSCRIPTION_URLS),
    "tool create": (_nothing, _tool_create, "config.url", TOOL_URLS),
    "tool patch": (_a_tool, _tool_patch, "config.url", TOOL_URLS),
    "agent create": (_connected, _agent_create, "webhook_url", AGENT_URLS),
    "agent patch": (make_agent, _agent_patch, "webhook_url", AGENT_URLS),
}


async def stored_urls(pool: Any, tenant: Any, statement: str) -> list[str | None]:
    return sorted(row["url"] or "" for row in await tenant_sql(pool, tenant, statement))


@pytest.mark.parametrize("url", WITH_USERINFO)
@pytest.mark.parametrize("kind", list(FIELDS))
async def test_a_url_with_a_user_name_or_password_is_400(client, pool, tenant, kind, url):
    arrange, send, field, urls = FIELDS[kind]
    target = await arrange(client, tenant)
    before = await stored_urls(pool, tenant, urls)
    response = await send(client, tenant, target, url)
    error = await error_of(response, 400)
    assert error["code"] == "validation_error", error
    assert field in [detail["field"] for detail in error.get("details", [])], error
    assert "user name or password" in str(error)
    assert PASSWORD not in await response.get_data(as_text=True)
    assert await stored_urls(pool, tenant, urls) == before


@pytest.mark.parametrize("kind", list(FIELDS))
async def test_an_at_sign_in_the_path_or_query_is_no_user_name(client, pool, tenant, kind):
    arrange, send, _, urls = FIELDS[kind]
    target = await arrange(client, tenant)
    url = f"https://hooks.example.com/by/ada@example.com?{uuid.uuid4().hex}=a@b"
    response = await send(client, tenant, target, url)
    assert response.status_code in (200, 201), await response.get_data(as_text=True)
    assert url in await stored_urls(pool, tenant, urls)
