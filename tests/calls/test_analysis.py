"""Post-call analysis (CONTRACT 10 "Analysis"): a call that ends with a contact message is
analysed by the worker with the agent's own model (here the fake vendors), exactly once.

Most tests write a call's end themselves (finish_call with a transcript) and run the analysis
job directly or let the worker run it; one whole sandbox call goes end to end.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from api.analysis import service as analysis
from api.analysis.models import VendorFailed
from api.analysis.tasks import analyse_call
from api.calls.service import finish_call
from integrations.telephony import CallState
from tenancy.due import DueWork
from tests.conftest import running_worker
from tests.factories import (
    connect,
    define_custom_field,
    make_agent,
    make_contact,
    subscribe,
    unique_phone,
)
from tests.helpers import scope_of, stored_events, tenant_sql

from .test_calls import place, ready_agent, wait_for_end

CALLS = "/webhooks/inbound/calls"
WAIT_SECONDS = 60
MESSAGES = [
    {"role": "agent", "text": "Hi, this is Sam. Do you have a minute?", "start_seconds": 0.5},
    {"role": "contact", "text": "Yes, I'd like a demo next week.", "start_seconds": 3.1},
    {"role": "agent", "text": "Great, I'll book it.", "start_seconds": 5.0},
]
SCHEMA = {
    "type": "object",
    "required": ["interest"],
    "properties": {
        "interest": {"type": "string", "enum": ["high", "low"]},
        "budget": {"type": "number"},
        "wants_demo": {"type": "boolean"},
        "note": {"type": "string"},
    },
}
ANALYSIS = {
    "summary": True,
    "success_criteria": "The contact agreed to a demo.",
    "data_schema": SCHEMA,
}
MODEL_OF = {"openai": "gpt-4o", "anthropic": "claude-3.5-haiku", "google": "gemini-2.5-flash"}


async def analysed_agent(client, tenant, vendor="openai", **overrides):
    if vendor != "openai":
        await connect(client, tenant, vendor)
    return await make_agent(
        client, tenant, llm_model=MODEL_OF[vendor], **{"analysis": ANALYSIS, **overrides}
    )


async def ended_call(
    client, pool, tenant, agent_id, messages=MESSAGES, status="completed", contact_id=None
):
    """A call of the agent that the runtime has just recorded (finish_call)."""
    contact_id = contact_id or await make_contact(client, tenant, phone=unique_phone())
    [row] = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, "
        "provider, status, answered_by) VALUES ($1, $2, '+14155550123', '+14155552671', "
        "'sandbox', 'in_progress', 'human') RETURNING id",
        uuid.UUID(contact_id),
        uuid.UUID(agent_id),
    )
    transcript = "\n".join(f"{m['role'].title()}: {m['text']}" for m in messages)
    await finish_call(
        scope_of(pool, tenant),
        row["id"],
        CallState(
            status,
            duration_seconds=30,
            transcript=transcript,
            messages=messages,
            answered_by="human",
        ),
    )
    return row["id"], contact_id


async def get_call(client, tenant, call_id):
    response = await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["call"]


async def run_job(pool, tenant, call_id, failures=0):
    """The worker's handler, as the engine calls it (ctx and the claimed row)."""
    work = DueWork(
        uuid.uuid4(),
        tenant.id,
        tenant.schema,
        analysis.ANALYSIS_WORK,
        call_id,
        None,
        failures + 1,
        1,
        failures,
    )
    return await analyse_call({"db": pool}, work)


async def wait_for_analysis(client, tenant, call_id):
    for _ in range(WAIT_SECONDS * 10):
        call = await get_call(client, tenant, call_id)
        if call["analysis"] and call["analysis"]["status"] != "pending":
            return call
        await asyncio.sleep(0.1)
    raise AssertionError(f"call {call_id} was never analysed: {call['analysis']}")


def llm_requests(vendors, vendor):
    return [r for r in vendors.requests_for(vendor, "llm")]


# --- pending, then the job --------------------------------------------------------------------


async def test_an_ended_call_is_pending_then_analysed_with_openai_structured_output(
    client, pool, tenant, vendors
):
    agent_id = await analysed_agent(client, tenant)
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    call = await get_call(client, tenant, call_id)
    assert call["analysis"] == {
        "status": "pending",
        "summary": None,
        "data": None,
        "success": None,
        "error": None,
    }
    # Its due-work row was written with the call's end.
    [due] = await tenant_sql(
        pool, tenant, "SELECT kind FROM control.due_work WHERE ref_id = $1", call_id
    )
    assert due["kind"] == "call_analysis"

    await run_job(pool, tenant, call_id)

    call = await get_call(client, tenant, call_id)
    assert call["analysis"] == {
        "status": "completed",
        "summary": "Yes, I'd like a demo next week.",
        "data": {
            "interest": "high",
            "budget": 1,
            "wants_demo": True,
            "note": "Yes, I'd like a demo next week.",
        },
        "success": True,
        "error": None,
    }
    [request] = llm_requests(vendors, "openai")
    body = request.body
    assert body["model"] == "gpt-4o"
    assert request.headers["authorization"].startswith("Bearer sk-")
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    assert response_format["json_schema"]["name"]
    schema = response_format["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"summary", "success", "data"}
    data = schema["properties"]["data"]
    assert set(data["required"]) == set(SCHEMA["properties"])
    assert data["properties"]["budget"]["type"] == ["number", "null"]
    assert data["properties"]["interest"] == {"type": "string", "enum": ["high", "low"]}
    assert "Contact: Yes, I'd like a demo next week." in json.dumps(body["messages"])
    assert "agreed to a demo" in json.dumps(body["messages"])


async def test_anthropic_is_asked_with_a_forced_tool(client, pool, tenant, vendors):
    agent_id = await analysed_agent(client, tenant, "anthropic")
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    await run_job(pool, tenant, call_id)
    call = await get_call(client, tenant, call_id)
    assert call["analysis"]["status"] == "completed"
    assert call["analysis"]["data"]["interest"] == "high" and call["analysis"]["success"] is True
    [request] = llm_requests(vendors, "anthropic")
    body = request.body
    assert body["model"] == "claude-3-5-haiku-latest"
    assert body["tool_choice"] == {"type": "tool", "name": body["tools"][0]["name"]}
    assert body["tools"][0]["input_schema"]["properties"]["data"]["properties"]["wants_demo"]
    assert request.headers["x-api-key"].startswith("sk-")


async def test_gemini_is_asked_with_a_response_schema(client, pool, tenant, vendors):
    agent_id = await analysed_agent(client, tenant, "google")
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    await run_job(pool, tenant, call_id)
    call = await get_call(client, tenant, call_id)
    assert call["analysis"]["status"] == "completed"
    assert call["analysis"]["data"] == {
        "interest": "high",
        "budget": 1,
        "wants_demo": True,
        "note": "Yes, I'd like a demo next week.",
    }
    [request] = llm_requests(vendors, "google")
    assert request.path.endswith("/models/gemini-2.5-flash:generateContent")
    config = request.body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    data = config["responseSchema"]["properties"]["data"]
    assert data["type"] == "OBJECT"
    assert data["properties"]["budget"] == {"type": "NUMBER", "nullable": True}
    assert data["properties"]["interest"]["enum"] == ["high", "low"]


async def test_summary_only_and_no_success_without_criteria(client, pool, tenant, vendors):
    agent_id = await analysed_agent(client, tenant, analysis={"summary": True})
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    await run_job(pool, tenant, call_id)
    call = await get_call(client, tenant, call_id)
    assert call["analysis"] == {
        "status": "completed",
        "summary": "Yes, I'd like a demo next week.",
        "data": None,
        "success": None,
        "error": None,
    }
    [request] = llm_requests(vendors, "openai")
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["summary"]


# --- skipped ----------------------------------------------------------------------------------


async def test_skipped_when_no_one_spoke_or_the_agent_has_no_analysis(
    client, pool, tenant, vendors
):
    agent_id = await analysed_agent(client, tenant)
    silent, _ = await ended_call(client, pool, tenant, agent_id, messages=[MESSAGES[0]])
    never_connected, _ = await ended_call(
        client, pool, tenant, agent_id, messages=[], status="failed"
    )
    plain = await make_agent(client, tenant)
    no_config, _ = await ended_call(client, pool, tenant, plain)
    for call_id in (silent, never_connected, no_config):
        call = await get_call(client, tenant, call_id)
        assert call["analysis"] == {
            "status": "skipped",
            "summary": None,
            "data": None,
            "success": None,
            "error": None,
        }
        await run_job(pool, tenant, call_id)
    assert (
        await tenant_sql(
            pool,
            tenant,
            "SELECT id FROM control.due_work WHERE kind = "
            "'call_analysis' AND ref_id = ANY($1::uuid[])",
            [silent, never_connected, no_config],
        )
        == []
    )
    assert llm_requests(vendors, "openai") == []


async def test_a_running_call_has_no_analysis(client, pool, tenant):
    agent_id = await analysed_agent(client, tenant)
    contact_id = await make_contact(client, tenant)
    [row] = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, "
        "provider, status) VALUES ($1, $2, '+14155550123', '+14155552671', 'sandbox', "
        "'in_progress') RETURNING id",
        uuid.UUID(contact_id),
        uuid.UUID(agent_id),
    )
    assert (await get_call(client, tenant, row["id"]))["analysis"] is None


# --- custom fields ----------------------------------------------------------------------------


async def test_mapped_data_is_written_to_custom_fields_with_type_checks(
    client, pool, tenant, vendors
):
    await define_custom_field(
        client, tenant, key="interest_level", field_type="select", options=["high", "low"]
    )
    await define_custom_field(client, tenant, key="budget_amount", field_type="number")
    await define_custom_field(client, tenant, key="demo_date", field_type="date")
    schema = {
        "type": "object",
        "properties": {
            "interest": {"type": "string", "enum": ["high", "low"]},
            "budget": {"type": "number"},
            # The fake answers what the marker says: not a date.
            "demo": {"type": "string", "description": '[fake:value="next tuesday"]'},
        },
    }
    agent_id = await analysed_agent(
        client,
        tenant,
        analysis={
            "data_schema": schema,
            "custom_field_map": {
                "interest": "interest_level",
                "budget": "budget_amount",
                "demo": "demo_date",
            },
        },
    )
    call_id, contact_id = await ended_call(client, pool, tenant, agent_id)
    await run_job(pool, tenant, call_id)

    call = await get_call(client, tenant, call_id)
    assert call["analysis"]["status"] == "completed"
    assert call["analysis"]["data"] == {"interest": "high", "budget": 1, "demo": "next tuesday"}
    error = call["analysis"]["error"]
    assert "data.demo" in error and "demo_date" in error and "YYYY-MM-DD" in error
    assert "interest" not in error and "budget" not in error
    contact = await (
        await client.get(f"/webhooks/inbound/contacts/{contact_id}", headers=tenant.headers)
    ).get_json()
    values = contact["contact"]["custom_field_values"]
    assert values == {"interest_level": "high", "budget_amount": 1}


# --- failures ---------------------------------------------------------------------------------


async def test_a_failing_vendor_is_retried_then_the_analysis_fails(client, pool, tenant, vendors):
    agent_id = await analysed_agent(client, tenant)
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    vendors.configure(failures={"openai": 500})
    # A try before the last raises: the engine retries it with backoff.
    with pytest.raises(VendorFailed):
        await run_job(pool, tenant, call_id, failures=0)
    assert (await get_call(client, tenant, call_id))["analysis"]["status"] == "pending"
    # The last allowed try records the failure.
    await run_job(pool, tenant, call_id, failures=9)
    call = await get_call(client, tenant, call_id)
    assert call["analysis"] == {
        "status": "failed",
        "summary": None,
        "data": None,
        "success": None,
        "error": "llm_error: openai answered 500",
    }
    assert len(llm_requests(vendors, "openai")) == 2


async def test_the_worker_retries_with_backoff_then_records_failed(
    client, pool, tenant, vendors, worker_env, migrated, servers
):
    worker_env(SWITCHBOARD_DUE_WORK_MAX_FAILURES="2")
    agent_id = await analysed_agent(client, tenant)
    vendors.configure(failures={"openai": 503})
    async with running_worker(migrated, servers.redis_url):
        call_id, _ = await ended_call(client, pool, tenant, agent_id)
        call = await wait_for_analysis(client, tenant, call_id)
    assert call["analysis"]["status"] == "failed"
    assert call["analysis"]["error"] == "llm_error: openai answered 503"
    assert len(llm_requests(vendors, "openai")) == 2


async def test_a_missing_integration_fails_at_once(client, pool, tenant, vendors):
    agent_id = await analysed_agent(client, tenant)
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    await tenant_sql(pool, tenant, "DELETE FROM integrations WHERE provider = 'openai'")
    await run_job(pool, tenant, call_id)
    call = await get_call(client, tenant, call_id)
    assert call["analysis"]["status"] == "failed"
    assert call["analysis"]["error"] == "llm_error: the openai integration is not connected"


# --- exactly once -----------------------------------------------------------------------------


async def test_the_job_run_twice_analyses_once(client, pool, tenant, vendors):
    await define_custom_field(client, tenant, key="interest_level", field_type="text")
    agent_id = await analysed_agent(
        client, tenant, analysis={**ANALYSIS, "custom_field_map": {"interest": "interest_level"}}
    )
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    # Two runs at once (a worker thought dead and its successor): one records.
    await asyncio.gather(run_job(pool, tenant, call_id), run_job(pool, tenant, call_id))
    first = await get_call(client, tenant, call_id)
    assert first["analysis"]["status"] == "completed"
    asked = len(llm_requests(vendors, "openai"))
    # A run after it finished does nothing: the vendor is not asked again.
    await run_job(pool, tenant, call_id)
    assert await get_call(client, tenant, call_id) == first
    assert len(llm_requests(vendors, "openai")) == asked
    analysed = [e for e in await stored_events(pool, tenant) if e["type"] == "call.analyzed"]
    assert len(analysed) == 1


# --- the event --------------------------------------------------------------------------------


async def test_call_analyzed_reaches_a_subscription_after_call_completed_and_the_agents_webhook(
    client, pool, tenant, vendors, worker, receiver
):
    await subscribe(client, tenant, receiver.url, ["call.completed", "call.analyzed"])
    agent_id = await analysed_agent(
        client, tenant, webhook=True, webhook_url=receiver.url.replace("/hook", "/hook?agent")
    )
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    await wait_for_analysis(client, tenant, call_id)
    for _ in range(WAIT_SECONDS * 10):
        if len(receiver.received) >= 4:
            break
        await asyncio.sleep(0.1)
    bodies = [(headers, json.loads(body)) for headers, body in receiver.received]
    kinds = sorted(body["type"] for _, body in bodies)
    assert kinds == ["call.analyzed", "call.analyzed", "call.completed", "call.completed"]
    completed = next(b for _, b in bodies if b["type"] == "call.completed")
    analyzed = next(b for _, b in bodies if b["type"] == "call.analyzed")
    assert completed["data"]["call"]["analysis"]["status"] == "pending"
    assert analyzed["data"]["sub_account_id"] == str(tenant.id)
    assert analyzed["data"]["call"]["id"] == str(call_id)
    assert analyzed["data"]["call"]["analysis"]["status"] == "completed"
    assert analyzed["timestamp"] > completed["timestamp"]
    events = [e["type"] for e in await stored_events(pool, tenant) if e["type"].startswith("call.")]
    assert events == ["call.completed", "call.analyzed"]


# --- a whole call -----------------------------------------------------------------------------


@pytest.mark.voice_e2e
async def test_a_whole_sandbox_call_is_analysed(client, tenant, vendors, worker):
    agent_id, contact_id = await ready_agent(client, tenant, analysis=ANALYSIS)
    call_id = (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
    await wait_for_end(client, tenant, call_id)
    call = await wait_for_analysis(client, tenant, call_id)
    assert call["analysis"] == {
        "status": "completed",
        "summary": "Hello?",
        "data": {"interest": "high", "budget": 1, "wants_demo": True, "note": "Hello?"},
        "success": True,
        "error": None,
    }
    assert any("response_format" in r.body for r in llm_requests(vendors, "openai"))


# --- data that does not fit, or cannot be stored (CONTRACT 18a) --------------------------------


def answered(value: str, kind: str = "string", **prop: object) -> dict[str, object]:
    """A data_schema property the fake model answers with `value` (JSON text)."""
    return {"type": kind, "description": f"[fake:value={value}]", **prop}


async def test_data_not_of_its_propertys_type_or_enum_is_left_out_and_named(
    client, pool, tenant, vendors
):
    await define_custom_field(client, tenant, key="demo_wanted", field_type="text")
    await define_custom_field(client, tenant, key="room_count", field_type="number")
    schema = {
        "type": "object",
        "properties": {
            "wants_demo": answered('"true"', "boolean"),
            "seats": answered("1.5", "integer"),
            "flagged": answered("true", "integer"),
            "interest": answered('"medium"', enum=["high", "low"]),
            "budget": answered('"12"', "number"),
            "note": answered("7"),
            "rooms": answered("2.0", "integer"),
            "urgent": answered("false", "boolean"),
            "level": answered("3", "number", enum=[1, 3]),
        },
    }
    agent_id = await analysed_agent(
        client,
        tenant,
        analysis={
            "data_schema": schema,
            "custom_field_map": {"wants_demo": "demo_wanted", "rooms": "room_count"},
        },
    )
    call_id, contact_id = await ended_call(client, pool, tenant, agent_id)

    await run_job(pool, tenant, call_id)

    analysis = (await get_call(client, tenant, call_id))["analysis"]
    assert analysis["status"] == "completed"
    assert analysis["data"] == {
        "wants_demo": None,
        "seats": None,
        "flagged": None,
        "interest": None,
        "budget": None,
        "note": None,
        "rooms": 2,
        "urgent": False,
        "level": 3,
    }
    # Each named once (in the data_schema's order as stored: jsonb's).
    misfits = {
        "wants_demo": "not of type boolean (the model gave a string)",
        "seats": "not of type integer (the model gave a number with a fraction)",
        "flagged": "not of type integer (the model gave a boolean)",
        "interest": "not one of its enum values",
        "budget": "not of type number (the model gave a string)",
        "note": "not of type string (the model gave an integer)",
    }
    assert sorted(analysis["error"].split("; ")) == sorted(
        f"data.{name} was left out: {why}" for name, why in misfits.items()
    )
    # Only what fits its property reaches the contact's custom fields.
    contact = await (
        await client.get(f"/webhooks/inbound/contacts/{contact_id}", headers=tenant.headers)
    ).get_json()
    assert contact["contact"]["custom_field_values"] == {"room_count": 2}


async def test_a_type_misfit_and_a_custom_field_misfit_are_both_named(
    client, pool, tenant, vendors
):
    await define_custom_field(client, tenant, key="demo_date", field_type="date")
    schema = {
        "type": "object",
        "properties": {"demo": answered('"next tuesday"'), "seats": answered('"two"', "integer")},
    }
    agent_id = await analysed_agent(
        client,
        tenant,
        analysis={"data_schema": schema, "custom_field_map": {"demo": "demo_date"}},
    )
    call_id, _ = await ended_call(client, pool, tenant, agent_id)
    await run_job(pool, tenant, call_id)
    analysis = (await get_call(client, tenant, call_id))["analysis"]
    assert analysis["data"] == {"demo": "next tuesday", "seats": None}
    first, second = analysis["error"].split("; ")
    assert first == "data.seats was left out: not of type integer (the model gave a string)"
    assert second.startswith("data.demo was not written to custom field demo_date: ")


async def test_an_answer_with_nul_lone_surrogates_or_nan_is_stored_cleaned(
    client, pool, tenant, vendors
):
    await define_custom_field(client, tenant, key="call_note", field_type="text")
    schema = {
        "type": "object",
        "properties": {
            "note": answered(r'"a\u0000b \ud800 \ud83d\ude00"'),
            "budget": answered("NaN", "number"),
            "ceiling": answered("-Infinity", "number"),
        },
    }
    agent_id = await analysed_agent(
        client,
        tenant,
        analysis={"data_schema": schema, "custom_field_map": {"note": "call_note"}},
    )
    call_id, contact_id = await ended_call(client, pool, tenant, agent_id)

    await run_job(pool, tenant, call_id)

    analysis = (await get_call(client, tenant, call_id))["analysis"]
    assert analysis == {
        "status": "completed",
        "summary": "Yes, I'd like a demo next week.",
        "data": {"note": "ab \ufffd \U0001f600", "budget": None, "ceiling": None},
        "success": None,
        "error": None,
    }
    contact = await (
        await client.get(f"/webhooks/inbound/contacts/{contact_id}", headers=tenant.headers)
    ).get_json()
    assert contact["contact"]["custom_field_values"] == {"call_note": "ab \ufffd \U0001f600"}
    [event] = [e for e in await stored_events(pool, tenant) if e["type"] == "call.analyzed"]
    assert event["data"]["call"]["analysis"]["data"]["note"] == "ab \ufffd \U0001f600"


async def test_an_analysis_that_still_cannot_be_stored_fails_at_once_with_its_error(
    client, pool, tenant, vendors, monkeypatch
):
    # A value the cleaning would miss (here: no cleaning at all) reaches PostgreSQL as it is.
    monkeypatch.setattr("api.analysis.models.storable", lambda value: value)
    schema = {"type": "object", "properties": {"note": answered(r'"a\u0000b"')}}
    agent_id = await analysed_agent(client, tenant, analysis={"data_schema": schema})
    call_id, _ = await ended_call(client, pool, tenant, agent_id)

    # Not a failure the engine retries (on the sub-account's key): recorded on the first try.
    await run_job(pool, tenant, call_id, failures=0)

    analysis = (await get_call(client, tenant, call_id))["analysis"]
    assert (analysis["status"], analysis["data"], analysis["summary"]) == ("failed", None, None)
    assert analysis["error"].startswith("storage_error: the analysis could not be stored: ")
    assert len(llm_requests(vendors, "openai")) == 1
    analysed = [e for e in await stored_events(pool, tenant) if e["type"] == "call.analyzed"]
    assert [e["data"]["call"]["analysis"]["status"] for e in analysed] == ["failed"]
