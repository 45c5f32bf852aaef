"""What cannot be stored is cleaned, never fatal (CONTRACT 18a): whole sandbox calls whose model
calls an http tool with arguments, and gets answers, that PostgreSQL cannot hold as they are (a
NUL, a lone surrogate, JSON NaN or Infinity). The call still ends with its record, recording and
charge; the tool call is stored cleaned (NUL removed, a lone surrogate as U+FFFD, a non-finite
number as null), as the tool's endpoint and the model got it."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest

from tests.factories import connect, credit, make_tool, priced_tenant
from tests.helpers import balance, tenant_sql
from tests.voice.test_call_scripts import ready
from tests.voice.test_call_tools import call_contact

pytestmark = pytest.mark.voice_e2e

PER_MINUTE = Decimal("1.00")
JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain"}

# (the model's arguments as its vendor sends them, stored; the tool's answer, stored)
CASES = {
    "nul_in_a_json_string": (
        r'{"order_id": "A\u0000-17"}',
        {"order_id": "A-17"},
        (JSON, rb'{"status": "ship\u0000ped", "a\u0000b": [1, "\u0000"]}'),
        {"status": "shipped", "ab": [1, ""]},
    ),
    "raw_nul_in_text": (
        r'{"order_id": "A-17"}',
        {"order_id": "A-17"},
        (TEXT, b"ship\x00ped"),
        "shipped",
    ),
    "lone_surrogate": (
        r'{"order_id": "A-\ud800"}',
        {"order_id": "A-\ufffd"},
        (JSON, rb'{"status": "\udc00shipped", "\ud83d": "ok \ud83d\ude00"}'),
        {"status": "\ufffdshipped", "\ufffd": "ok \U0001f600"},
    ),
    "nan_and_infinity": (
        r'{"order_id": "A-17", "quantity": NaN}',
        {"order_id": "A-17", "quantity": None},
        (JSON, b'{"total": NaN, "most": Infinity, "least": [-Infinity, 1.5]}'),
        {"total": None, "most": None, "least": [None, 1.5]},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_an_unstorable_tool_answer_is_stored_cleaned_and_the_call_is_recorded_and_charged(
    client: Any, pool: Any, agency: Any, worker: Any, vendors: Any, receiver: Any, case: str
) -> None:
    sent, arguments, (headers, answer), result = CASES[case]
    tenant = await priced_tenant(client, agency, call_per_minute=float(PER_MINUTE))
    await credit(client, tenant, 5)
    lookup = await make_tool(client, tenant, name="lookup_order", config={"url": receiver.url()})
    receiver.script("/hook", (200, headers, answer))
    agent_id = await ready(
        client,
        tenant,
        llm_model="gpt-4o-mini",
        voice_id="openai/nova",
        recording=True,
        tool_ids=[lookup["id"]],
        prompt=f"You look orders up. [fake:call=lookup_order on=minute args={sent}]",
    )
    before = await balance(pool, tenant)

    call, _ = await call_contact(client, tenant, agent_id)

    # The call's own record: its outcome, transcript, recording and charge.
    assert (call["status"], call["ended_reason"], call["error"]) == (
        "completed",
        "customer_hangup",
        None,
    )
    assert call["recording_url"] is not None
    minutes = math.ceil(call["duration_seconds"] / 60)
    assert Decimal(str(call["cost"])) == PER_MINUTE * minutes
    assert before - await balance(pool, tenant) == PER_MINUTE * minutes
    # The tool call, cleaned: the endpoint got the cleaned arguments, the model the cleaned
    # result, and the contact heard it read out.
    [entry] = call["tool_calls"]
    assert (entry["name"], entry["status"]) == ("lookup_order", "succeeded")
    assert entry["arguments"] == arguments and entry["result"] == result
    [request] = receiver.to("/hook")
    assert request.json()["arguments"] == arguments
    read_out = result if isinstance(result, str) else json.dumps(result)
    agent_said = [m["text"] for m in call["messages"] if m["role"] == "agent"]
    assert any(text.startswith(f"Done: {read_out[:40]}") for text in agent_said), agent_said
    assert "Contact: Hello?" in call["transcript"] and "Agent: Done: " in call["transcript"]
    assert "\x00" not in json.dumps(call)
    [stored] = await tenant_sql(
        pool, tenant, "SELECT tool_calls, billed_minutes FROM calls WHERE id = $1", call["id"]
    )
    assert stored["billed_minutes"] == minutes
    assert stored["tool_calls"][0]["result"] == result


@pytest.mark.parametrize(
    ("vendor", "model"), [("anthropic", "claude-3.5-haiku"), ("google", "gemini-2.5-flash")]
)
async def test_a_lone_surrogate_in_the_models_arguments_is_cleaned_for_every_vendor(
    client: Any,
    pool: Any,
    tenant: Any,
    worker: Any,
    vendors: Any,
    receiver: Any,
    vendor: str,
    model: str,
) -> None:
    await connect(client, tenant, vendor)
    lookup = await make_tool(client, tenant, name="lookup_order", config={"url": receiver.url()})
    receiver.script("/hook", (200, JSON, b'{"status": "shipped"}'))
    agent_id = await ready(
        client,
        tenant,
        llm_model=model,
        voice_id="openai/nova",
        tool_ids=[lookup["id"]],
        prompt=r'[fake:call=lookup_order on=minute args={"order_id": "A-\ud800\u0000"}]',
    )

    call, _ = await call_contact(client, tenant, agent_id)

    # The model's next request carried the cleaned arguments: the call went on to its goodbye.
    assert (call["status"], call["ended_reason"]) == ("completed", "customer_hangup")
    assert call["messages"][-1]["text"] == "Thank you, goodbye."
    [entry] = call["tool_calls"]
    assert entry["arguments"] == {"order_id": "A-\ufffd"} and entry["status"] == "succeeded"
    assert receiver.to("/hook")[0].json()["arguments"] == {"order_id": "A-\ufffd"}
