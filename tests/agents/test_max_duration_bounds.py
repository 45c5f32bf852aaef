"""An agent's max_duration is 0.1 to 240 minutes, on create-agent and on PATCH (CONTRACT 11)."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import agent_body, connect, make_agent
from tests.helpers import expect_error, tenant_sql

CREATE = "/functions/v1/crm-api/create-agent"
AGENTS = "/webhooks/inbound/agents"

OUT_OF_BOUNDS = [1e-320, 0.09, 0.0999, 0, 0.0, 240.01, 240.0000001, 241, 1440, 1e308]
IN_BOUNDS = [0.1, 0.5, 1, 240, 240.0]


async def agent_rows(pool, tenant):
    return [dict(row) for row in await tenant_sql(pool, tenant, "SELECT * FROM agents")]


def fields_of(body):
    return [detail["field"] for detail in body["error"]["details"]]


@pytest.mark.parametrize("value", OUT_OF_BOUNDS)
async def test_create_agent_max_duration_out_of_bounds_is_400(client, pool, tenant, value):
    await connect(client, tenant)
    response = await client.post(
        CREATE, json=agent_body(tenant, max_duration=value), headers=tenant.headers
    )
    body = await expect_error(response, 400, "validation_error")
    assert body["success"] is False
    assert fields_of(body) == ["max_duration"]
    assert await agent_rows(pool, tenant) == []


@pytest.mark.parametrize("value", IN_BOUNDS)
async def test_create_agent_max_duration_bounds_are_inclusive(client, pool, tenant, value):
    await connect(client, tenant)
    response = await client.post(
        CREATE, json=agent_body(tenant, max_duration=value), headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    [row] = await agent_rows(pool, tenant)
    assert row["max_duration"] == value


@pytest.mark.parametrize("value", OUT_OF_BOUNDS)
async def test_patch_agent_max_duration_out_of_bounds_is_400_and_changes_nothing(
    client, pool, tenant, value
):
    agent_id = await make_agent(client, tenant)
    before = await agent_rows(pool, tenant)
    response = await client.patch(
        f"{AGENTS}/{agent_id}", json={"max_duration": value}, headers=tenant.headers
    )
    body = await expect_error(response, 400, "validation_error")
    assert body["status"] == "error"
    assert fields_of(body) == ["max_duration"]
    assert await agent_rows(pool, tenant) == before


@pytest.mark.parametrize("value", IN_BOUNDS)
async def test_patch_agent_max_duration_bounds_are_inclusive(client, pool, tenant, value):
    agent_id = await make_agent(client, tenant)
    response = await client.patch(
        f"{AGENTS}/{agent_id}", json={"max_duration": value}, headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await response.get_json())["agent"]["max_duration"] == value
    [row] = await tenant_sql(
        pool, tenant, "SELECT max_duration FROM agents WHERE id = $1", uuid.UUID(agent_id)
    )
    assert row["max_duration"] == value
