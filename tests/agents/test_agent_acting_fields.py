"""Agents gain timezone, tool_ids and analysis (CONTRACT 10, 10a): set on create and PATCH,
shown by GET /agents/{id} (and the list); create-agent still answers only its five fields."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import agent_body, connect, define_custom_field, make_agent, make_tool
from tests.helpers import expect_error, tenant_sql

CREATE = "/functions/v1/crm-api/create-agent"
AGENTS = "/webhooks/inbound/agents"

DATA_SCHEMA = {
    "type": "object",
    "properties": {
        "budget": {"type": "number", "description": "The budget the contact named"},
        "interested": {"type": "boolean"},
        "plan": {"type": "string", "enum": ["basic", "pro"]},
    },
    "required": ["interested"],
}


async def create(client, tenant, **overrides):
    await connect(client, tenant)
    return await client.post(CREATE, json=agent_body(tenant, **overrides), headers=tenant.headers)


async def shown(client, tenant, agent_id):
    response = await client.get(f"{AGENTS}/{agent_id}", headers=tenant.headers)
    assert response.status_code == 200
    return (await response.get_json())["agent"]


async def patch(client, tenant, agent_id, body):
    return await client.patch(f"{AGENTS}/{agent_id}", json=body, headers=tenant.headers)


async def agent_count(pool, tenant):
    return (await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM agents"))[0]["n"]


async def refused(response, field, status=400, code="validation_error"):
    body = await expect_error(response, status, code)
    fields = [detail["field"] for detail in body["error"].get("details", [])]
    assert any(name == field or name.startswith(f"{field}.") for name in fields), body


async def test_create_agent_answer_keeps_its_five_fields(client, tenant):
    tool = await make_tool(client, tenant)
    response = await create(
        client, tenant, timezone="Europe/Berlin", tool_ids=[tool["id"]], analysis={"summary": True}
    )
    assert response.status_code == 201
    assert set(await response.get_json()) == {"success", "id", "name", "is_active", "created_at"}


# --- timezone -----------------------------------------------------------------------------------


async def test_agent_timezone_defaults_to_utc(client, tenant):
    agent = await shown(client, tenant, await make_agent(client, tenant))
    assert agent["timezone"] == "UTC"
    assert agent["tool_ids"] == [] and agent["analysis"] is None


async def test_agent_timezone_is_kept_and_shown(client, tenant):
    agent_id = await make_agent(client, tenant, timezone="America/Los_Angeles")
    assert (await shown(client, tenant, agent_id))["timezone"] == "America/Los_Angeles"


@pytest.mark.parametrize(
    "zone",
    ["Mars/Olympus_Mons", "utc ", "europe/berlin", "localtime", "../../etc/passwd", "", "+01:00"],
)
async def test_unknown_timezone_is_400(client, pool, tenant, zone):
    await refused(await create(client, tenant, timezone=zone), "timezone")
    assert await agent_count(pool, tenant) == 0


async def test_patch_changes_the_timezone(client, tenant):
    agent_id = await make_agent(client, tenant)
    response = await patch(client, tenant, agent_id, {"timezone": "Asia/Tokyo"})
    assert (await response.get_json())["agent"]["timezone"] == "Asia/Tokyo"
    assert (await shown(client, tenant, agent_id))["timezone"] == "Asia/Tokyo"


@pytest.mark.parametrize("zone", ["Nowhere/City", None])
async def test_patch_unknown_or_null_timezone_is_400(client, tenant, zone):
    agent_id = await make_agent(client, tenant)
    await refused(await patch(client, tenant, agent_id, {"timezone": zone}), "timezone")
    assert (await shown(client, tenant, agent_id))["timezone"] == "UTC"


# --- tool_ids -----------------------------------------------------------------------------------


async def test_agent_tool_ids_are_kept_in_order_and_shown(client, tenant):
    first, second = await make_tool(client, tenant), await make_tool(client, tenant)
    agent_id = await make_agent(client, tenant, tool_ids=[second["id"], first["id"]])
    assert (await shown(client, tenant, agent_id))["tool_ids"] == [second["id"], first["id"]]
    listed = await (await client.get(AGENTS, headers=tenant.headers)).get_json()
    assert listed["agents"][0]["tool_ids"] == [second["id"], first["id"]]


async def test_more_than_20_tool_ids_is_400(client, pool, tenant):
    ids = [(await make_tool(client, tenant))["id"] for _ in range(21)]
    await refused(await create(client, tenant, tool_ids=ids), "tool_ids")
    assert await agent_count(pool, tenant) == 0


async def test_20_tool_ids_are_accepted(client, tenant):
    ids = [(await make_tool(client, tenant))["id"] for _ in range(20)]
    agent_id = await make_agent(client, tenant, tool_ids=ids)
    assert (await shown(client, tenant, agent_id))["tool_ids"] == ids


async def test_a_tool_id_named_twice_is_400(client, tenant):
    tool = await make_tool(client, tenant)
    await refused(await create(client, tenant, tool_ids=[tool["id"], tool["id"]]), "tool_ids")


async def test_a_tool_id_that_is_not_a_uuid_is_400_invalid_uuid(client, pool, tenant):
    await expect_error(await create(client, tenant, tool_ids=["not-a-uuid"]), 400, "invalid_uuid")
    assert await agent_count(pool, tenant) == 0


async def test_an_unknown_tool_id_is_404_not_found(client, pool, tenant):
    tool = await make_tool(client, tenant)
    response = await create(client, tenant, tool_ids=[tool["id"], str(uuid.uuid4())])
    await expect_error(response, 404, "not_found")
    assert await agent_count(pool, tenant) == 0


async def test_another_sub_accounts_tool_id_is_404(client, pool, tenant, tenant_second):
    theirs = await make_tool(client, tenant_second)
    await expect_error(await create(client, tenant, tool_ids=[theirs["id"]]), 404, "not_found")
    assert await agent_count(pool, tenant) == 0


async def test_patch_replaces_and_clears_tool_ids(client, tenant):
    first, second = await make_tool(client, tenant), await make_tool(client, tenant)
    agent_id = await make_agent(client, tenant, tool_ids=[first["id"]])
    response = await patch(client, tenant, agent_id, {"tool_ids": [second["id"]]})
    assert (await response.get_json())["agent"]["tool_ids"] == [second["id"]]
    cleared = await patch(client, tenant, agent_id, {"tool_ids": []})
    assert (await cleared.get_json())["agent"]["tool_ids"] == []


async def test_patch_unknown_tool_id_is_404_and_changes_nothing(client, tenant):
    tool = await make_tool(client, tenant)
    agent_id = await make_agent(client, tenant, tool_ids=[tool["id"]])
    response = await patch(
        client, tenant, agent_id, {"tool_ids": [str(uuid.uuid4())], "name": "Renamed"}
    )
    await expect_error(response, 404, "not_found")
    agent = await shown(client, tenant, agent_id)
    assert agent["tool_ids"] == [tool["id"]] and agent["name"] == "Sales agent"


async def test_patch_null_tool_ids_is_400(client, tenant):
    agent_id = await make_agent(client, tenant)
    await refused(await patch(client, tenant, agent_id, {"tool_ids": None}), "tool_ids")


async def test_patch_more_than_20_tool_ids_is_400(client, tenant):
    agent_id = await make_agent(client, tenant)
    ids = [str(uuid.uuid4()) for _ in range(21)]
    await refused(await patch(client, tenant, agent_id, {"tool_ids": ids}), "tool_ids")


# --- analysis -----------------------------------------------------------------------------------


async def test_analysis_is_kept_with_every_key_shown(client, tenant):
    await define_custom_field(client, tenant, key="budget_amount", field_type="number")
    analysis = {
        "success_criteria": "The contact books a demo.",
        "data_schema": DATA_SCHEMA,
        "custom_field_map": {"budget": "budget_amount"},
    }
    agent_id = await make_agent(client, tenant, analysis=analysis)
    assert (await shown(client, tenant, agent_id))["analysis"] == {"summary": True, **analysis}


async def test_analysis_summary_alone_shows_nulls_for_the_rest(client, tenant):
    agent_id = await make_agent(client, tenant, analysis={"summary": False})
    assert (await shown(client, tenant, agent_id))["analysis"] == {
        "summary": False,
        "success_criteria": None,
        "data_schema": None,
        "custom_field_map": None,
    }


async def test_analysis_success_criteria_over_2000_characters_is_400(client, tenant):
    response = await create(client, tenant, analysis={"success_criteria": "c" * 2001})
    await refused(response, "analysis.success_criteria")


async def test_analysis_success_criteria_of_2000_characters_is_accepted(client, tenant):
    agent_id = await make_agent(client, tenant, analysis={"success_criteria": "c" * 2000})
    assert (await shown(client, tenant, agent_id))["analysis"]["success_criteria"] == "c" * 2000


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(21)}},
        {"type": "object", "properties": {"address": {"type": "object"}}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
        {"type": "string"},
    ],
)
async def test_analysis_data_schema_outside_the_tool_parameter_bounds_is_400(
    client, pool, tenant, schema
):
    await refused(
        await create(client, tenant, analysis={"data_schema": schema}), "analysis.data_schema"
    )
    assert await agent_count(pool, tenant) == 0


async def test_custom_field_map_key_that_is_no_data_schema_property_is_400(client, tenant):
    await define_custom_field(client, tenant, key="budget_amount", field_type="number")
    response = await create(
        client,
        tenant,
        analysis={"data_schema": DATA_SCHEMA, "custom_field_map": {"salary": "budget_amount"}},
    )
    await refused(response, "analysis.custom_field_map.salary")


async def test_custom_field_map_without_data_schema_is_400(client, tenant):
    await define_custom_field(client, tenant, key="budget_amount", field_type="number")
    response = await create(
        client, tenant, analysis={"custom_field_map": {"budget": "budget_amount"}}
    )
    await refused(response, "analysis.custom_field_map.budget")


async def test_custom_field_map_value_that_is_no_custom_field_is_400(client, pool, tenant):
    response = await create(
        client,
        tenant,
        analysis={"data_schema": DATA_SCHEMA, "custom_field_map": {"budget": "no_such_field"}},
    )
    await refused(response, "analysis.custom_field_map.budget")
    assert await agent_count(pool, tenant) == 0


async def test_custom_field_map_value_of_an_inactive_field_is_400(client, pool, tenant):
    await define_custom_field(client, tenant, key="old_budget", field_type="number")
    await tenant_sql(
        pool, tenant, "UPDATE custom_fields SET is_active = false WHERE key = 'old_budget'"
    )
    response = await create(
        client,
        tenant,
        analysis={"data_schema": DATA_SCHEMA, "custom_field_map": {"budget": "old_budget"}},
    )
    await refused(response, "analysis.custom_field_map.budget")


async def test_another_sub_accounts_custom_field_is_400(client, tenant, tenant_second):
    await define_custom_field(client, tenant_second, key="their_budget", field_type="number")
    response = await create(
        client,
        tenant,
        analysis={"data_schema": DATA_SCHEMA, "custom_field_map": {"budget": "their_budget"}},
    )
    await refused(response, "analysis.custom_field_map.budget")


async def test_analysis_with_an_unknown_key_is_400(client, tenant):
    await refused(
        await create(client, tenant, analysis={"summary": True, "extra": 1}), "analysis.extra"
    )


async def test_patch_sets_and_clears_analysis(client, tenant):
    agent_id = await make_agent(client, tenant)
    response = await patch(
        client,
        tenant,
        agent_id,
        {"analysis": {"success_criteria": "Booked.", "data_schema": DATA_SCHEMA}},
    )
    assert (await response.get_json())["agent"]["analysis"] == {
        "summary": True,
        "success_criteria": "Booked.",
        "data_schema": DATA_SCHEMA,
        "custom_field_map": None,
    }
    cleared = await patch(client, tenant, agent_id, {"analysis": None})
    assert (await cleared.get_json())["agent"]["analysis"] is None
    assert (await shown(client, tenant, agent_id))["analysis"] is None


async def test_patch_analysis_to_a_missing_custom_field_is_400_and_changes_nothing(client, tenant):
    agent_id = await make_agent(client, tenant, analysis={"summary": True})
    response = await patch(
        client,
        tenant,
        agent_id,
        {"analysis": {"data_schema": DATA_SCHEMA, "custom_field_map": {"budget": "nope"}}},
    )
    await refused(response, "analysis.custom_field_map.budget")
    assert (await shown(client, tenant, agent_id))["analysis"]["data_schema"] is None
