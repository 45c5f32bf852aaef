"""The send_sms tool sends at most 1,600 characters (CONTRACT 18a): a longer text is answered
`{error: "content_too_long"}` and nothing is sent or charged; 1,600 characters go out whole. A
whole sandbox call whose model (the fake vendors) calls both in one turn."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.factories import SMS_PRICE, credit, make_tool
from tests.helpers import balance, tenant_sql
from tests.voice.test_call_scripts import ready
from tests.voice.test_call_tools import SMS_TOOL, call_contact, tool_call

pytestmark = pytest.mark.voice_e2e


async def test_send_sms_over_1600_characters_is_content_too_long_and_sends_nothing(
    client, pool, tenant_priced, worker, vendors
) -> None:
    tenant = tenant_priced
    await credit(client, tenant, 1)
    too_long = await make_tool(client, tenant, name="text_long", **SMS_TOOL)
    longest = await make_tool(client, tenant, name="text_longest", **SMS_TOOL)
    script = (
        f"[fake:call=text_long args={json.dumps({'content': 'L' * 1601})}] "
        f"[fake:call=text_longest args={json.dumps({'content': 'S' * 1600})}]"
    )
    agent_id = await ready(
        client,
        tenant,
        llm_model="gpt-4o-mini",
        voice_id="openai/nova",
        tool_ids=[too_long["id"], longest["id"]],
        prompt=script,
    )
    before = await balance(pool, tenant)

    call, contact_id = await call_contact(client, tenant, agent_id)

    assert call["status"] == "completed", call
    refused = tool_call(call, "text_long")
    assert (refused["status"], refused["result"]) == ("failed", {"error": "content_too_long"})
    sent = tool_call(call, "text_longest")
    assert sent["status"] == "succeeded", sent
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT m.id, m.content FROM messages AS m JOIN conversations AS v "
        "ON v.id = m.conversation_id WHERE v.contact_id = $1 AND m.direction = 'outbound'",
        uuid.UUID(contact_id),
    )
    assert [(str(row["id"]), row["content"]) for row in rows] == [
        (sent["result"]["message_id"], "S" * 1600)
    ]
    assert before - await balance(pool, tenant) == SMS_PRICE
