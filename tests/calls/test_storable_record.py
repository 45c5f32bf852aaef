"""A call's record holds what its model and vendors said, cleaned (CONTRACT 18a "What cannot be
stored is cleaned, never fatal"): the voice runtime's record of a call (finish_call) whose model
replied with a NUL or a lone surrogate, or whose vendor failed with one in its error, is written
and charged, with NUL removed, a lone surrogate as U+FFFD and a non-finite number as null."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

from api.calls.service import finish_call
from integrations.telephony import CallState
from tests.factories import make_agent, make_contact, priced_tenant
from tests.helpers import balance, scope_of, stored_events, tenant_sql

CALLS = "/webhooks/inbound/calls"
PER_MINUTE = 1.0


async def answered_call(client, pool, tenant) -> uuid.UUID:
    """A call the voice runtime answered and is about to record."""
    agent_id = await make_agent(client, tenant)
    contact_id = await make_contact(client, tenant)
    [row] = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, provider, status, "
        "answered_by) VALUES ($1, $2, '+14155550123', '+14155552671', 'sandbox', 'in_progress', "
        "'human') RETURNING id",
        uuid.UUID(contact_id),
        uuid.UUID(agent_id),
    )
    return row["id"]


async def shown(client, tenant, call_id):
    response = await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["call"]


async def test_model_text_with_nul_and_lone_surrogates_is_recorded_cleaned_and_charged(
    client, pool, agency
):
    tenant = await priced_tenant(client, agency, credit=5, call_per_minute=PER_MINUTE)
    call_id = await answered_call(client, pool, tenant)
    messages = [
        {"role": "agent", "text": "Hel\x00lo \ud83d, how are you?", "start_seconds": 0.5},
        {"role": "contact", "text": "Fine \ud83d\ude00", "start_seconds": 2.0},
        {"role": "agent", "text": "\udc00Good\x00bye.", "start_seconds": 4.0},
    ]
    tool_calls = [
        {
            "id": str(uuid.uuid4()),
            "tool_id": None,
            "name": "lookup_order",
            "arguments": {"order\x00_id": "A-\ud800"},
            "result": {"total": float("nan"), "most": float("inf"), "text": "a\x00b"},
            "status": "succeeded",
            "at": "2026-12-02T10:00:00.000Z",
            "duration_ms": 12,
        }
    ]
    transcript = "\n".join(f"{m['role'].title()}: {m['text']}" for m in messages)

    await finish_call(
        scope_of(pool, tenant),
        call_id,
        CallState(
            "completed",
            duration_seconds=61,
            transcript=transcript,
            messages=messages,
            tool_calls=tool_calls,
            answered_by="human",
        ),
    )

    call = await shown(client, tenant, call_id)
    assert (call["status"], call["ended_reason"]) == ("completed", "customer_hangup")
    assert [m["text"] for m in call["messages"]] == [
        "Hello \ufffd, how are you?",
        "Fine \U0001f600",
        "\ufffdGoodbye.",
    ]
    assert call["transcript"] == (
        "Agent: Hello \ufffd, how are you?\nContact: Fine \U0001f600\nAgent: \ufffdGoodbye."
    )
    [entry] = call["tool_calls"]
    assert entry["arguments"] == {"order_id": "A-\ufffd"}
    assert entry["result"] == {"total": None, "most": None, "text": "ab"}
    # Charged its two started minutes, and told as it is stored.
    assert Decimal(str(call["cost"])) == Decimal("2.00")
    assert await balance(pool, tenant) == Decimal("3.00")
    [event] = [e for e in await stored_events(pool, tenant) if e["type"] == "call.completed"]
    data = event["data"] if isinstance(event["data"], dict) else json.loads(event["data"])
    assert data["call"]["messages"] == call["messages"]
    assert data["call"]["tool_calls"] == call["tool_calls"]


async def test_a_vendor_error_with_nul_and_a_lone_surrogate_is_recorded_cleaned(
    client, pool, tenant
):
    call_id = await answered_call(client, pool, tenant)
    await finish_call(
        scope_of(pool, tenant),
        call_id,
        CallState(
            "failed",
            duration_seconds=3,
            ended_reason="failed",
            error="llm_error: the vendor said \x00\ud800",
            answered_by="human",
        ),
    )
    call = await shown(client, tenant, call_id)
    assert (call["status"], call["ended_reason"]) == ("failed", "failed")
    assert call["error"] == "llm_error: the vendor said \ufffd"
