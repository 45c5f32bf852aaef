"""A call's variables and context (CONTRACT 10 "Context"): POST /contacts/{id}/call takes
`variables`, GET /calls/{id} (the list, the call events) shows them beside tool_calls,
transferred_to and analysis, and the voice runtime reads the call's placeholder values and its
agent's rendered prompt through api/calls/context.py.

Calls here are placed through the API with a number written straight into the tenant's schema
and no worker running: they stay `queued`, which is all the context needs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from api.calls.context import call_context, rendered_instructions
from api.calls.service import finish_call
from integrations.telephony import CallState
from tenancy.db import tenant_transaction
from tenancy.errors import APIError
from tests.factories import (
    BASE,
    create_contact,
    define_custom_field,
    make_agent,
    make_contact,
)
from tests.helpers import expect_error, scope_of, tenant_sql

CALLS = f"{BASE}/calls"
NUMBER = "+14155550123"


async def callable_agent(client, pool, tenant, **overrides):
    """An agent with a number of its own (written in the schema: no provider job to wait
    for)."""
    agent_id = await make_agent(client, tenant, **overrides)
    await tenant_sql(
        pool,
        tenant,
        "INSERT INTO phone_numbers (phone_number, purchased, agent_id, "
        "provider, assigned_at) VALUES ($1, false, $2, 'sandbox', now())",
        NUMBER,
        uuid.UUID(agent_id),
    )
    return agent_id


async def place(client, tenant, contact_id, agent_id, **body):
    return await client.post(
        f"{BASE}/contacts/{contact_id}/call",
        json={"agent_id": agent_id, **body},
        headers=tenant.headers,
    )


async def placed(client, tenant, contact_id, agent_id, **body):
    response = await place(client, tenant, contact_id, agent_id, **body)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["call_id"]


async def shown(client, tenant, call_id):
    response = await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)
    assert response.status_code == 200
    return (await response.get_json())["call"]


async def call_count(pool, tenant):
    return (await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM calls"))[0]["n"]


async def refused(response, field="variables"):
    body = await expect_error(response, 400, "validation_error")
    fields = [detail["field"] for detail in body["error"].get("details", [])]
    assert any(name == field or name.startswith(f"{field}.") for name in fields), body


@pytest.fixture
async def ready(client, pool, tenant):
    agent_id = await callable_agent(client, pool, tenant)
    return agent_id, await make_contact(client, tenant)


# --- variables on the call ----------------------------------------------------------------------


async def test_call_placed_with_variables_shows_them(client, pool, tenant, ready):
    agent_id, contact_id = ready
    variables = {"order_id": "A-17", "plan": "pro", "note": "{{ contact.email }}"}
    call_id = await placed(client, tenant, contact_id, agent_id, variables=variables)
    call = await shown(client, tenant, call_id)
    assert call["variables"] == variables
    rows = await tenant_sql(
        pool, tenant, "SELECT variables FROM calls WHERE id = $1", uuid.UUID(call_id)
    )
    assert rows[0]["variables"] == variables


async def test_call_without_variables_shows_the_new_fields_empty(client, tenant, ready):
    agent_id, contact_id = ready
    call = await shown(client, tenant, await placed(client, tenant, contact_id, agent_id))
    assert (call["variables"], call["tool_calls"], call["transferred_to"], call["analysis"]) == (
        {},
        [],
        None,
        None,
    )


async def test_null_variables_are_an_empty_object(client, tenant, ready):
    agent_id, contact_id = ready
    call_id = await placed(client, tenant, contact_id, agent_id, variables=None)
    assert (await shown(client, tenant, call_id))["variables"] == {}


async def test_the_call_list_shows_the_new_fields(client, tenant, ready):
    agent_id, contact_id = ready
    call_id = await placed(client, tenant, contact_id, agent_id, variables={"a": "1"})
    listed = await (await client.get(CALLS, headers=tenant.headers)).get_json()
    assert listed["calls"] == [await shown(client, tenant, call_id)]


async def test_50_variables_of_1000_characters_are_accepted(client, tenant, ready):
    agent_id, contact_id = ready
    variables = {f"v{index}": "x" * 1000 for index in range(50)}
    call_id = await placed(client, tenant, contact_id, agent_id, variables=variables)
    assert (await shown(client, tenant, call_id))["variables"] == variables


async def test_more_than_50_variables_is_400(client, pool, tenant, ready):
    agent_id, contact_id = ready
    variables = {f"v{index}": "x" for index in range(51)}
    await refused(await place(client, tenant, contact_id, agent_id, variables=variables))
    assert await call_count(pool, tenant) == 0


@pytest.mark.parametrize(
    "name", ["Order", "1st", "_x", "order-id", "order.id", "a" * 41, "", "caf\u00e9", "with space"]
)
async def test_variable_name_not_matching_the_pattern_is_400(client, pool, tenant, ready, name):
    agent_id, contact_id = ready
    await refused(await place(client, tenant, contact_id, agent_id, variables={name: "x"}))
    assert await call_count(pool, tenant) == 0


async def test_variable_name_of_40_characters_is_accepted(client, tenant, ready):
    agent_id, contact_id = ready
    call_id = await placed(client, tenant, contact_id, agent_id, variables={"a" * 40: "x"})
    assert (await shown(client, tenant, call_id))["variables"] == {"a" * 40: "x"}


@pytest.mark.parametrize("value", ["x" * 1001, 5, None, True, ["a"], {"a": "b"}])
async def test_variable_value_that_is_no_string_of_at_most_1000_characters_is_400(
    client, pool, tenant, ready, value
):
    agent_id, contact_id = ready
    await refused(
        await place(client, tenant, contact_id, agent_id, variables={"plan": value}),
        "variables.plan",
    )
    assert await call_count(pool, tenant) == 0


@pytest.mark.parametrize("variables", [["a"], "plan=pro", 5])
async def test_variables_that_are_no_object_are_400(client, tenant, ready, variables):
    agent_id, contact_id = ready
    await refused(await place(client, tenant, contact_id, agent_id, variables=variables))


async def test_the_call_event_carries_the_new_fields(client, pool, tenant, ready):
    agent_id, contact_id = ready
    call_id = await placed(client, tenant, contact_id, agent_id, variables={"plan": "pro"})
    await finish_call(
        scope_of(pool, tenant),
        uuid.UUID(call_id),
        CallState("failed", ended_reason="no_answer", error="provider_error: x"),
    )
    [event] = await tenant_sql(pool, tenant, "SELECT data FROM events WHERE type = 'call.failed'")
    call = event["data"]["call"]
    # An agent without an analysis config: skipped once the call ended (CONTRACT 10).
    skipped = {"status": "skipped", "summary": None, "data": None, "success": None, "error": None}
    assert (call["variables"], call["tool_calls"], call["transferred_to"], call["analysis"]) == (
        {"plan": "pro"},
        [],
        None,
        skipped,
    )
    assert call == await shown(client, tenant, call_id)


# --- the context ----------------------------------------------------------------------------------


async def _sub_account_name(pool, tenant):
    return await pool.fetchval("SELECT name FROM control.sub_accounts WHERE id = $1", tenant.id)


async def _context(pool, tenant, call_id, now=None):
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await call_context(conn, uuid.UUID(call_id), now=now)


async def _rendered(pool, tenant, call_id, now=None):
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await rendered_instructions(conn, uuid.UUID(call_id), now=now)


async def _contact_with_fields(client, tenant, **fields):
    for key, kind, options in (
        ("city", "text", None),
        ("seats", "number", None),
        ("vip", "boolean", None),
        ("renewal", "date", None),
        ("colours", "multi_select", ["red", "blue", "green"]),
    ):
        body = {"key": key, "field_type": kind}
        if options:
            body["options"] = options
        await define_custom_field(client, tenant, **body)
    return await create_contact(
        client,
        tenant,
        first_name="Ada",
        last_name="Lovelace",
        email="ada@example.com",
        phone="+14155552671",
        custom_field_values={
            "city": "Zürich",
            "seats": 12,
            "vip": True,
            "renewal": "2027-01-31",
            "colours": ["red", "blue"],
        },
        **fields,
    )


async def test_call_context_holds_every_name_of_the_contract(client, pool, tenant):
    agent_id = await callable_agent(client, pool, tenant, timezone="America/New_York")
    contact_id = await _contact_with_fields(client, tenant)
    call_id = await placed(
        client, tenant, contact_id, agent_id, variables={"order_id": "A-17", "plan": "pro"}
    )
    instant = datetime(2026, 11, 27, 3, 4, 5, tzinfo=UTC)
    assert await _context(pool, tenant, call_id, now=instant) == {
        "contact.first_name": "Ada",
        "contact.last_name": "Lovelace",
        "contact.name": "Ada Lovelace",
        "contact.email": "ada@example.com",
        "contact.phone": "+14155552671",
        "contact.custom.city": "Zürich",
        "contact.custom.seats": "12",
        "contact.custom.vip": "true",
        "contact.custom.renewal": "2027-01-31",
        "contact.custom.colours": "red, blue",
        "call.direction": "outbound",
        "call.from_number": NUMBER,
        "call.to_number": "+14155552671",
        "sub_account.name": await _sub_account_name(pool, tenant),
        "now": "2026-11-26T22:04:05-05:00",
        "today": "2026-11-26",
        "order_id": "A-17",
        "plan": "pro",
    }


async def test_missing_contact_fields_are_empty_strings(client, pool, tenant):
    agent_id = await callable_agent(client, pool, tenant)
    contact_id = await create_contact(client, tenant, phone="+14155552671")
    values = await _context(pool, tenant, await placed(client, tenant, contact_id, agent_id))
    assert (values["contact.first_name"], values["contact.last_name"], values["contact.email"]) == (
        "",
        "",
        "",
    )
    assert values["contact.name"] == "+14155552671"


async def test_call_context_of_an_unknown_call_is_404(pool, tenant):
    with pytest.raises(APIError) as raised:
        await _context(pool, tenant, str(uuid.uuid4()))
    assert (raised.value.status, raised.value.code) == (404, "not_found")


async def test_rendered_instructions_fill_the_prompt_and_first_message(client, pool, tenant):
    agent_id = await callable_agent(
        client,
        pool,
        tenant,
        timezone="Europe/Berlin",
        prompt="You call {{ contact.first_name }} for {{sub_account.name}} about order "
        "{{ order_id }} on {{ today }}. Unknown: [{{ contact.nickname }}].",
        first_message="Hi {{ contact.name }}, this is about {{ contact.custom.city }}.",
    )
    contact_id = await _contact_with_fields(client, tenant)
    call_id = await placed(client, tenant, contact_id, agent_id, variables={"order_id": "A-17"})
    prompt, first = await _rendered(
        pool, tenant, call_id, now=datetime(2026, 12, 31, 23, 30, tzinfo=UTC)
    )
    name = await _sub_account_name(pool, tenant)
    assert prompt == (f"You call Ada for {name} about order A-17 on 2027-01-01. Unknown: [].")
    assert first == "Hi Ada Lovelace, this is about Zürich."


async def test_placeholder_text_in_contact_data_and_variables_is_never_rendered(
    client, pool, tenant
):
    agent_id = await callable_agent(
        client,
        pool,
        tenant,
        prompt="Name: {{ contact.name }}. City: {{ contact.custom.city }}. Note: {{ note }}.",
    )
    await define_custom_field(client, tenant, key="city", field_type="text")
    contact_id = await create_contact(
        client,
        tenant,
        name="{{ contact.email }}",
        email="secret@example.com",
        phone="+14155552671",
        custom_field_values={"city": "{{ now }}"},
    )
    call_id = await placed(
        client, tenant, contact_id, agent_id, variables={"note": "{{ contact.phone }}"}
    )
    prompt, _ = await _rendered(pool, tenant, call_id)
    assert prompt == ("Name: {{ contact.email }}. City: {{ now }}. Note: {{ contact.phone }}.")


async def test_a_first_message_that_renders_blank_is_none(client, pool, tenant):
    agent_id = await callable_agent(client, pool, tenant, first_message="{{ contact.first_name }}")
    contact_id = await create_contact(client, tenant, phone="+14155552671")
    _, first = await _rendered(pool, tenant, await placed(client, tenant, contact_id, agent_id))
    assert first is None


async def test_an_agent_without_first_message_renders_none(client, pool, tenant, ready):
    agent_id, contact_id = ready
    prompt, first = await _rendered(
        pool, tenant, await placed(client, tenant, contact_id, agent_id)
    )
    assert (prompt, first) == ("", None)


# --- rendered text is bounded (CONTRACT 18a) ----------------------------------------------------


async def _contact_with_note(client, tenant, note):
    await define_custom_field(client, tenant, key="note", field_type="text")
    return await create_contact(
        client, tenant, phone="+14155552671", custom_field_values={"note": note}
    )


async def test_a_custom_field_of_5000_characters_renders_1000_of_them(client, pool, tenant):
    agent_id = await callable_agent(
        client,
        pool,
        tenant,
        prompt="Note: {{ contact.custom.note }}.",
        first_message="About {{ contact.custom.note }}",
    )
    contact_id = await _contact_with_note(client, tenant, "n" * 5000)
    call_id = await placed(client, tenant, contact_id, agent_id)
    prompt, first = await _rendered(pool, tenant, call_id)
    assert prompt == f"Note: {'n' * 1000}."
    assert first == f"About {'n' * 1000}"


async def test_a_first_message_of_199_placeholders_renders_2000_characters(client, pool, tenant):
    agent_id = await callable_agent(client, pool, tenant, first_message="{{a}}" * 199 + "Hi!")
    contact_id = await create_contact(client, tenant, phone="+14155552671")
    call_id = await placed(client, tenant, contact_id, agent_id, variables={"a": "a" * 1000})
    _, first = await _rendered(pool, tenant, call_id)
    assert first == "a" * 2000


async def test_a_prompt_rendering_past_40000_characters_is_cut_there(client, pool, tenant):
    agent_id = await callable_agent(
        client, pool, tenant, prompt="{{ contact.custom.note }}\n" * 50 + "The end."
    )
    contact_id = await _contact_with_note(client, tenant, "n" * 5000)
    call_id = await placed(client, tenant, contact_id, agent_id)
    prompt, _ = await _rendered(pool, tenant, call_id)
    assert prompt == (("n" * 1000 + "\n") * 50)[:40_000]


async def test_a_prompt_of_40000_rendered_characters_is_whole(client, pool, tenant):
    agent_id = await callable_agent(client, pool, tenant, prompt="{{ a }}" * 40)
    contact_id = await create_contact(client, tenant, phone="+14155552671")
    call_id = await placed(client, tenant, contact_id, agent_id, variables={"a": "a" * 1000})
    prompt, _ = await _rendered(pool, tenant, call_id)
    assert prompt == "a" * 40_000
