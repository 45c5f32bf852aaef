"""An agent that acts (CONTRACT 10 "Context", "Tools"): whole sandbox calls, placed through the API,
dialled by the worker's sandbox carrier, answered by the voice runtime, whose model (the fake
vendors, scripted with `[fake:call=...]`) calls the agent's tools."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from tests.calls.test_calls import CALLS, place, wait_for_end
from tests.factories import (
    APPOINTMENTS,
    CONTACTS,
    SMS_PRICE,
    connect,
    create_calendar,
    credit,
    free_slots,
    make_tool,
)
from tests.helpers import TIMESTAMP, balance, stored_timestamps_off_format, tenant_sql
from tests.voice.test_call_scripts import PERSON, ready

pytestmark = pytest.mark.voice_e2e

SMS_TOOL = {"type": "send_sms", "description": "Text the contact.", "parameters": ..., "config": {}}


async def call_contact(
    client: Any, tenant: Any, agent_id: str, phone: str = PERSON, **extra: Any
) -> tuple[dict[str, Any], str]:
    response = await client.post(
        CONTACTS,
        json={"first_name": "Ada", "last_name": "Lovelace", "phone": phone},
        headers=tenant.headers,
    )
    assert response.status_code in (200, 201), await response.get_data(as_text=True)
    contact_id = (await response.get_json())["contact_id"]
    response = await place(client, tenant, contact_id, agent_id, **extra)
    assert response.status_code == 200, await response.get_data(as_text=True)
    call = await wait_for_end(client, tenant, (await response.get_json())["call_id"])
    return call, contact_id


def tool_call(call: dict[str, Any], name: str) -> dict[str, Any]:
    return next(entry for entry in call["tool_calls"] if entry["name"] == name)


async def test_openai_model_reads_its_context_calls_an_http_tool_and_texts_in_one_turn(
    client, pool, tenant_priced, worker, vendors, receiver
) -> None:
    tenant = tenant_priced
    await credit(client, tenant, 1)
    lookup = await make_tool(
        client,
        tenant,
        name="lookup_order",
        config={"url": receiver.url("/orders"), "headers": {"X-Shop": "sunny"}},
    )
    sms = await make_tool(client, tenant, name="text_contact", **SMS_TOOL)
    receiver.verify_with("/orders", lookup["secret"])
    receiver.script(
        "/orders", (200, {"content-type": "application/json"}, b'{"status": "shipped"}')
    )
    script = (
        '[fake:call=lookup_order args={"order_id": "A-17"}] '
        '[fake:call=text_contact args={"content": "Your order A-17 has shipped."}]'
    )
    agent_id = await ready(
        client,
        tenant,
        llm_model="gpt-4o-mini",
        voice_id="openai/nova",
        tool_ids=[lookup["id"], sms["id"]],
        webhook=True,
        webhook_url=receiver.url("/calls"),
        prompt=f"You help {{{{ contact.first_name }}}} with order {{{{ order_ref }}}}. {script}",
        first_message="Hello {{contact.first_name}}!",
    )
    before = await balance(pool, tenant)
    call, contact_id = await call_contact(client, tenant, agent_id, variables={"order_ref": "A-17"})
    assert call["status"] == "completed" and call["ended_reason"] == "customer_hangup"
    # The model was sent the rendered instructions; the first message was rendered too.
    chats = vendors.requests_for(vendor="openai", kind="llm")
    system = chats[0].body["messages"][0]["content"]
    assert system.startswith("You help Ada with order A-17. [fake:call=lookup_order")
    assert call["messages"][1] == {**call["messages"][1], "role": "agent", "text": "Hello Ada!"}
    # Both tools in one turn, offered in OpenAI's format with their parameters.
    offered = {t["function"]["name"]: t["function"] for t in chats[0].body["tools"]}
    assert set(offered) == {"end_call", "lookup_order", "text_contact"}
    assert offered["lookup_order"]["parameters"]["required"] == ["order_id"]
    assert [e["name"] for e in call["tool_calls"]] == ["lookup_order", "text_contact"]
    order = tool_call(call, "lookup_order")
    assert order["status"] == "succeeded" and order["result"] == {"status": "shipped"}
    assert order["tool_id"] == lookup["id"] and order["arguments"] == {"order_id": "A-17"}
    assert order["duration_ms"] >= 0 and TIMESTAMP.fullmatch(order["at"]), order["at"]
    # The tool's endpoint got the signed body, with the tool's header.
    [request] = receiver.to("/orders")
    assert request.verified is True and request.headers["x-shop"] == "sunny"
    assert request.json() == {
        "tool_call_id": order["id"],
        "call_id": call["id"],
        "agent_id": agent_id,
        "contact_id": contact_id,
        "tool": "lookup_order",
        "arguments": {"order_id": "A-17"},
    }
    # The text went to the contact's conversation, charged; its id is the result.
    text = tool_call(call, "text_contact")
    assert text["status"] == "succeeded" and text["tool_id"] == sms["id"]
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT id, content, message_type FROM messages WHERE id = $1",
        text["result"]["message_id"],
    )
    assert rows[0]["content"] == "Your order A-17 has shipped." and rows[0]["message_type"] == "sms"
    assert before - await balance(pool, tenant) == SMS_PRICE
    # The model read both results, then went on.
    after_tools = [c for c in chats if c.body["messages"][-1]["role"] == "tool"]
    assert after_tools and "shipped" in json.dumps(after_tools[0].body["messages"])
    # The post-call webhook shows the tool calls as GET /calls/{id} does.
    for _ in range(100):
        if receiver.to("/calls"):
            break
        await asyncio.sleep(0.1)
    sent = receiver.to("/calls")[0].json()["data"]["call"]
    assert sent["tool_calls"] == call["tool_calls"] and sent["transferred_to"] is None
    # Every timestamp stored as JSON (the call's tool_calls, the events' payloads) is written
    # as the answers write them.
    assert await stored_timestamps_off_format(pool, tenant) == []


async def test_anthropic_model_transfers_the_call(client, pool, tenant, worker, vendors) -> None:
    await connect(client, tenant, "anthropic")
    transfer = await make_tool(
        client,
        tenant,
        name="to_sales",
        type="transfer_call",
        description="Hand the contact to sales.",
        parameters=...,
        config={"phone_number": "+14155550100", "message": "Connecting you to sales now."},
    )
    agent_id = await ready(
        client,
        tenant,
        llm_model="claude-3.5-haiku",
        voice_id="openai/nova",
        tool_ids=[transfer["id"]],
        prompt="[fake:call=to_sales on=minute]",
    )
    call, _ = await call_contact(client, tenant, agent_id)
    assert call["status"] == "completed" and call["ended_reason"] == "transferred"
    assert call["transferred_to"] == "+14155550100"
    [entry] = call["tool_calls"]
    assert entry["status"] == "succeeded" and entry["tool_id"] == transfer["id"]
    assert ("agent", "Connecting you to sales now.") in [
        (m["role"], m["text"]) for m in call["messages"]
    ]
    offered = vendors.requests_for(vendor="anthropic", kind="llm")[0].body["tools"]
    assert {t["name"] for t in offered} == {"end_call", "to_sales"}
    # The agent's part only: the contact kept talking after the transfer (to sales).
    assert call["messages"][-1]["text"] != "Thank you, goodbye."


async def test_gemini_model_gets_errors_for_a_busy_transfer_and_a_revoked_contact(
    client, pool, tenant, worker, vendors
) -> None:
    await connect(client, tenant, "google")
    transfer = await make_tool(
        client,
        tenant,
        name="to_sales",
        type="transfer_call",
        description="Hand the contact to sales.",
        parameters=...,
        config={"phone_number": "+14155550187"},
    )
    sms = await make_tool(client, tenant, name="text_contact", **SMS_TOOL)
    agent_id = await ready(
        client,
        tenant,
        llm_model="gemini-2.5-flash",
        voice_id="openai/nova",
        tool_ids=[transfer["id"], sms["id"]],
        prompt="[fake:call=to_sales on=minute] [fake:call=text_contact on=minute]",
    )
    response = await client.post(
        CONTACTS, json={"first_name": "Ada", "phone": PERSON}, headers=tenant.headers
    )
    contact_id = (await response.get_json())["contact_id"]
    assert (
        await client.put(
            f"{CONTACTS}/{contact_id}/consent",
            json={"channel": "sms", "status": "revoked"},
            headers=tenant.headers,
        )
    ).status_code == 200
    call, _ = await call_contact(client, tenant, agent_id)
    # The call went on to the contact's goodbye.
    assert call["status"] == "completed" and call["ended_reason"] == "customer_hangup"
    assert call["transferred_to"] is None
    assert call["messages"][-1] == {**call["messages"][-1], "text": "Thank you, goodbye."}
    assert [(e["name"], e["status"]) for e in call["tool_calls"]] == [
        ("to_sales", "failed"),
        ("text_contact", "failed"),
    ]
    assert "busy" in tool_call(call, "to_sales")["result"]["error"]
    assert tool_call(call, "text_contact")["result"] == {"error": "contact_opted_out"}
    declared = vendors.requests_for(vendor="google", kind="llm")[0].body["tools"]
    names = {f["name"] for t in declared for f in t.get("functionDeclarations") or []}
    assert names == {"end_call", "to_sales", "text_contact"}
    assert Decimal(call["cost"]) == 0


async def test_a_tool_answer_after_the_hang_up_is_still_recorded(
    client, pool, tenant, worker, vendors, receiver
) -> None:
    slow = await make_tool(
        client,
        tenant,
        name="slow_lookup",
        config={"url": receiver.url("/slow"), "timeout_seconds": 15},
    )
    receiver.script("/slow", ("sleep", 3))
    await connect(client, tenant, "deepseek")
    agent_id = await ready(
        client,
        tenant,
        llm_model="deepseek-chat",
        voice_id="openai/nova",
        tool_ids=[slow["id"]],
        voice_activity_timeout=100,
        prompt="[fake:call=slow_lookup on=goodbye]",
    )
    call, _ = await call_contact(client, tenant, agent_id)
    assert call["status"] == "completed" and call["ended_reason"] == "customer_hangup"
    [entry] = call["tool_calls"]
    assert entry["status"] == "succeeded" and entry["duration_ms"] >= 2500
    assert len(receiver.to("/slow")) == 1


async def test_model_checks_availability_books_the_contact_and_hears_of_a_taken_slot(
    client, pool, tenant, worker, vendors
) -> None:
    calendar = await create_calendar(client, tenant)
    today = datetime.now(UTC).date()
    free = await free_slots(
        client, tenant, calendar["id"], today.isoformat(), (today + timedelta(days=1)).isoformat()
    )
    # Not the first slot: it may start before the call gets to book it.
    start = free[1]["start"]
    tools = {}
    for name, kind in (
        ("check_availability", "check_availability"),
        ("book_appointment", "book_appointment"),
        ("book_again", "book_appointment"),
    ):
        tools[name] = await make_tool(
            client,
            tenant,
            name=name,
            type=kind,
            description="Calendar work.",
            parameters=...,
            config={"calendar_id": calendar["id"]},
        )
    booking = json.dumps({"start": start})
    script = (
        f'[fake:call=check_availability on=hello args={{"date": "{today.isoformat()}"}}] '
        f"[fake:call=book_appointment on=minute args={booking}] "
        f"[fake:call=book_again on=sounds args={booking}]"
    )
    agent_id = await ready(
        client,
        tenant,
        llm_model="gpt-4o-mini",
        voice_id="openai/nova",
        tool_ids=[tool["id"] for tool in tools.values()],
        prompt=f"You book consultations. {script}",
    )
    call, contact_id = await call_contact(client, tenant, agent_id)
    chats = vendors.requests_for(vendor="openai", kind="llm")
    offered_tools = {t["function"]["name"]: t["function"] for t in chats[0].body["tools"]}
    assert set(offered_tools) == {"end_call", *tools}
    assert offered_tools["book_appointment"]["parameters"]["required"] == ["start"]
    # The taken slot was the model's to hear: the call went on to the contact's goodbye.
    assert call["status"] == "completed" and call["ended_reason"] == "customer_hangup"
    assert call["messages"][-1] == {**call["messages"][-1], "text": "Thank you, goodbye."}
    assert [(e["name"], e["status"]) for e in call["tool_calls"]] == [
        ("check_availability", "succeeded"),
        ("book_appointment", "succeeded"),
        ("book_again", "failed"),
    ]
    check = tool_call(call, "check_availability")
    assert check["tool_id"] == tools["check_availability"]["id"]
    assert check["arguments"] == {"date": today.isoformat()}
    offered = check["result"]["slots"]
    assert 1 <= len(offered) <= 10
    assert all(set(slot) == {"start", "start_local"} for slot in offered)
    assert start in [slot["start"] for slot in offered]
    booked = tool_call(call, "book_appointment")
    assert booked["arguments"] == {"start": start}
    result = booked["result"]
    assert set(result) == {"appointment_id", "start", "end"} and result["start"] == start
    assert tool_call(call, "book_again")["result"] == {"error": "slot_unavailable"}
    # The appointment: the call's contact, booked by the agent on this call.
    response = await client.get(
        f"{APPOINTMENTS}/{result['appointment_id']}", headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    appointment = (await response.get_json())["appointment"]
    assert appointment["source"] == "agent" and appointment["call_id"] == call["id"]
    assert appointment["contact_id"] == contact_id
    assert appointment["calendar_id"] == calendar["id"]
    assert (appointment["start"], appointment["end"]) == (start, result["end"])
    # GET /calls/{id} shows the same record.
    shown = await client.get(f"{CALLS}/{call['id']}", headers=tenant.headers)
    assert (await shown.get_json())["call"]["tool_calls"] == call["tool_calls"]
    # The slots and the booking in the tools' results, the reminders and the events too.
    assert await stored_timestamps_off_format(pool, tenant) == []


@pytest.mark.parametrize(
    ("vendor", "model"), [("anthropic", "claude-3.5-haiku"), ("google", "gemini-2.5-flash")]
)
async def test_anthropic_and_gemini_models_find_a_slot_and_book_the_one_they_offered(
    client, pool, tenant, worker, vendors, vendor, model
) -> None:
    await connect(client, tenant, vendor)
    # An hour's notice: the slot offered is still free when the contact agrees to it.
    calendar = await create_calendar(client, tenant, min_notice_minutes=60)
    tools = [
        await make_tool(
            client,
            tenant,
            name=kind,
            type=kind,
            description="Calendar work.",
            parameters=...,
            config={"calendar_id": calendar["id"]},
        )
        for kind in ("check_availability", "book_appointment")
    ]
    agent_id = await ready(
        client,
        tenant,
        llm_model=model,
        voice_id="openai/nova",
        tool_ids=[tool["id"] for tool in tools],
        # No arguments scripted: the model books the first slot of the result it was sent.
        prompt="[fake:call=check_availability on=minute] [fake:call=book_appointment on=good]",
    )
    call, contact_id = await call_contact(client, tenant, agent_id)
    assert call["status"] == "completed" and call["ended_reason"] == "customer_hangup"
    assert [(e["name"], e["status"]) for e in call["tool_calls"]] == [
        ("check_availability", "succeeded"),
        ("book_appointment", "succeeded"),
    ]
    first = tool_call(call, "check_availability")["result"]["slots"][0]
    booked = tool_call(call, "book_appointment")
    assert booked["arguments"] == {"start": first["start"]}
    # What the contact heard: the slot offered, then the booking confirmed.
    said = [m["text"] for m in call["messages"] if m["role"] == "agent"]
    assert any(t.startswith("The first free time is ") for t in said), said
    assert any(t.startswith("You are booked for ") for t in said), said
    response = await client.get(
        f"{APPOINTMENTS}/{booked['result']['appointment_id']}", headers=tenant.headers
    )
    appointment = (await response.get_json())["appointment"]
    assert (appointment["status"], appointment["source"]) == ("booked", "agent")
    assert (appointment["call_id"], appointment["contact_id"]) == (call["id"], contact_id)
    assert appointment["start"] == first["start"]
    # Offered, and answered, in the vendor's own format.
    chats = vendors.requests_for(vendor=vendor, kind="llm")
    if vendor == "anthropic":
        offered = {t["name"]: t["input_schema"] for t in chats[0].body["tools"]}
        results = [
            b
            for c in chats
            for m in c.body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    else:
        offered = {
            f["name"]: f.get("parameters") or f.get("parametersJsonSchema")
            for t in chats[0].body["tools"]
            for f in t.get("functionDeclarations") or []
        }
        results = [
            part["functionResponse"]
            for c in chats
            for content in c.body["contents"]
            for part in content.get("parts") or []
            if "functionResponse" in part
        ]
    assert set(offered) == {"end_call", "check_availability", "book_appointment"}
    assert offered["book_appointment"]["required"] == ["start"]
    assert first["start"] in json.dumps(results)


async def test_check_availability_offers_only_slots_still_bookable_five_minutes_later(
    client, pool, tenant, worker, vendors
) -> None:
    # 5-minute slots, no notice: the API's free slots start within the next 5 minutes.
    calendar = await create_calendar(client, tenant, slot_minutes=5)
    today = datetime.now(UTC).date()
    listed = await free_slots(
        client, tenant, calendar["id"], today.isoformat(), (today + timedelta(days=1)).isoformat()
    )
    tool = await make_tool(
        client,
        tenant,
        name="check_availability",
        type="check_availability",
        description="Free times.",
        parameters=...,
        config={"calendar_id": calendar["id"]},
    )
    agent_id = await ready(
        client,
        tenant,
        llm_model="gpt-4o-mini",
        voice_id="openai/nova",
        tool_ids=[tool["id"]],
        prompt="[fake:call=check_availability on=hello]",
    )
    call, _ = await call_contact(client, tenant, agent_id)
    check = tool_call(call, "check_availability")
    asked = datetime.fromisoformat(check["at"])
    offered = [datetime.fromisoformat(slot["start"]) for slot in check["result"]["slots"]]
    assert len(offered) == 10
    # The API listed a slot the tool left out: it starts too soon to be chosen and booked.
    assert datetime.fromisoformat(listed[0]["start"]) < asked + timedelta(minutes=5)
    assert min(offered) >= asked + timedelta(minutes=5) - timedelta(seconds=1)
    assert min(offered) <= asked + timedelta(minutes=10)
