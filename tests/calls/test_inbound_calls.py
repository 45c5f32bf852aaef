"""Inbound AI calls through the sandbox carrier (CONTRACT 6 "Inbound", 9): a signed ring of one
of the sub-account's numbers becomes a conversation with the number's agent."""

from __future__ import annotations

import hashlib
import hmac
import json

from api.conversations.signing import HEADER, sign
from tests.factories import assign, import_number, make_agent, make_contact
from tests.helpers import expect_error, tenant_sql

from .test_calls import wait_for_end

NUMBER = "+14155550123"
CALLER = "+14155550161"
# A sandbox caller that is busy: the call never connects (CONTRACT 6).
BUSY_CALLER = "+14155550187"


async def ring(client, sub_account_id, body, signature=""):
    """POST the sandbox's inbound call, signed (or with `signature`; None: unsigned)."""
    raw = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if signature is not None:
        headers[HEADER] = signature or sign(sub_account_id, raw)
    return await client.post(
        f"/webhooks/providers/sandbox/calls/{sub_account_id}", data=raw, headers=headers
    )


async def answering_agent(client, tenant, number=NUMBER, **agent):
    agent_id = await make_agent(client, tenant, **agent)
    number_id = await import_number(client, tenant, number)
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    return agent_id


async def test_inbound_call_is_a_conversation_with_the_numbers_agent(client, pool, tenant, worker):
    agent_id = await answering_agent(client, tenant)
    response = await ring(client, tenant.id, {"from": CALLER, "to": NUMBER})
    assert response.status_code == 202, await response.get_data(as_text=True)
    body = await response.get_json()
    assert body["status"] == "success"
    call = await wait_for_end(client, tenant, body["call_id"])
    assert call["status"] == "completed"
    assert (call["agent_id"], call["contact_id"]) == (agent_id, body["contact_id"])
    assert (call["from_number"], call["to_number"]) == (CALLER, NUMBER)
    reply = "Agent: Great, thank you for your time."
    assert call["transcript"].split("\n") == [
        "Contact: Hello?",
        reply,
        "Contact: Yes, I have a minute.",
        reply,
        "Contact: That sounds good.",
        reply,
        "Contact: Thank you, goodbye.",
    ]
    [row] = await tenant_sql(
        pool,
        tenant,
        "SELECT direction, answered_by, ended_reason FROM calls WHERE id = $1",
        body["call_id"],
    )
    assert dict(row) == {
        "direction": "inbound",
        "answered_by": "human",
        "ended_reason": "customer_hangup",
    }


async def test_unknown_caller_becomes_an_inbound_call_contact(client, pool, tenant, worker):
    await answering_agent(client, tenant)
    body = await (await ring(client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER})).get_json()
    [contact] = await tenant_sql(
        pool, tenant, "SELECT phone, lead_source FROM contacts WHERE id = $1", body["contact_id"]
    )
    assert dict(contact) == {"phone": BUSY_CALLER, "lead_source": "inbound_call"}
    call = await wait_for_end(client, tenant, body["call_id"])
    assert call["status"] == "failed"


async def test_known_caller_keeps_its_contact(client, pool, tenant, worker):
    await answering_agent(client, tenant)
    contact_id = await make_contact(client, tenant, phone=BUSY_CALLER)
    body = await (await ring(client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER})).get_json()
    assert body["contact_id"] == contact_id
    [row] = await tenant_sql(
        pool, tenant, "SELECT lead_source FROM contacts WHERE id = $1", contact_id
    )
    assert row["lead_source"] != "inbound_call"
    await wait_for_end(client, tenant, body["call_id"])


async def test_inbound_call_to_a_number_not_held_is_404(
    client, pool, tenant, tenant_second, worker
):
    await import_number(client, tenant_second, NUMBER)
    await expect_error(
        await ring(client, tenant.id, {"from": CALLER, "to": NUMBER}), 404, "not_found"
    )
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []


async def test_inbound_call_to_an_unassigned_number_is_409(client, pool, tenant, worker):
    await import_number(client, tenant, NUMBER)
    await expect_error(
        await ring(client, tenant.id, {"from": CALLER, "to": NUMBER}),
        409,
        "phone_number_unassigned",
    )
    assert await tenant_sql(pool, tenant, "SELECT id FROM contacts") == []


async def test_inbound_call_to_an_inactive_agent_is_409_and_rings_nothing(
    client, pool, tenant, worker
):
    await answering_agent(client, tenant, is_active=False)
    await expect_error(
        await ring(client, tenant.id, {"from": CALLER, "to": NUMBER}), 409, "agent_inactive"
    )
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []
    assert await tenant_sql(pool, tenant, "SELECT id FROM contacts") == []


async def test_inbound_call_with_a_wrong_signature_is_401_and_rings_nothing(
    client, pool, tenant, tenant_second, worker
):
    await answering_agent(client, tenant)
    raw = json.dumps({"from": CALLER, "to": NUMBER}).encode()
    for signature in (sign(tenant_second.id, raw), "v1=00", None):
        response = await ring(client, tenant.id, {"from": CALLER, "to": NUMBER}, signature)
        await expect_error(response, 401, "invalid_signature")
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []


async def test_inbound_call_invalid_body_is_400(client, tenant):
    for body in ({"from": "555", "to": NUMBER}, {"from": CALLER}, {"from": CALLER, "to": 1}):
        await expect_error(await ring(client, tenant.id, body), 400, "validation_error")


async def test_inbound_call_sub_account_not_uuid_is_400(client):
    response = await client.post("/webhooks/providers/sandbox/calls/xyz", json={})
    assert response.status_code == 400


async def test_inbound_call_is_signed_with_the_configured_sandbox_secret(
    client, pool, tenant, worker, worker_env
):
    await answering_agent(client, tenant)
    worker_env(SWITCHBOARD_SANDBOX_WEBHOOK_SECRET="sandbox-secret-" + tenant.id.hex)
    body = {"from": BUSY_CALLER, "to": NUMBER}
    raw = json.dumps(body).encode()
    digest = hmac.new(
        f"sandbox-secret-{tenant.id.hex}".encode(), f"{tenant.id}.".encode() + raw, hashlib.sha256
    ).hexdigest()
    # The signature derived from the key pepper no longer does.
    worker_env(SWITCHBOARD_SANDBOX_WEBHOOK_SECRET="")
    derived = sign(tenant.id, raw)
    worker_env(SWITCHBOARD_SANDBOX_WEBHOOK_SECRET="sandbox-secret-" + tenant.id.hex)
    await expect_error(await ring(client, tenant.id, body, derived), 401, "invalid_signature")
    response = await ring(client, tenant.id, body, f"v1={digest}")
    assert response.status_code == 202
    await wait_for_end(client, tenant, (await response.get_json())["call_id"])
