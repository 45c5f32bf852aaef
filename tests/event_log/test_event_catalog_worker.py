"""Events of work the worker finishes, and of callers who reach us first: call.completed and
call.failed (to subscriptions and the agent's webhook, one event), campaign.completed, and the
contact.created of an unknown inbound caller (CONTRACT 7 "Event catalog")."""

from __future__ import annotations

import asyncio
import json

from api.conversations.signing import HEADER, sign
from tests.calls.test_calls import ready_agent, wait_for_end
from tests.calls.test_inbound_calls import BUSY_CALLER, NUMBER, answering_agent, ring
from tests.factories import add_contact, create_campaign, make_contact, subscribe
from tests.helpers import get_campaign, get_contact, schedule, soon, tenant_sql, wait_for_status

from .test_event_catalog import events_of

BUSY = "+14155550187"


async def delivered(pool, tenant, count):
    """The tenant's deliveries once `count` of them left pending (the live worker sends them)."""
    async with asyncio.timeout(30):
        while True:
            rows = await tenant_sql(
                pool,
                tenant,
                "SELECT subscription_id, agent_id, message_id, "
                "event_type, status FROM webhook_deliveries",
            )
            if len(rows) >= count and all(row["status"] != "pending" for row in rows):
                return rows
            await asyncio.sleep(0.1)


async def test_failed_call_reaches_subscriptions_and_the_agent_as_one_event(
    client, pool, tenant, receiver, worker
):
    subscription = await subscribe(client, tenant, receiver.url("/sub"), ["call.failed"])
    await subscribe(client, tenant, receiver.url("/completed"), ["call.completed"])
    agent_id, _ = await ready_agent(
        client, tenant, webhook=True, webhook_url=receiver.url("/agent")
    )
    contact_id = await make_contact(client, tenant, phone=BUSY)
    response = await client.post(
        f"/webhooks/inbound/contacts/{contact_id}/call",
        json={"agent_id": agent_id},
        headers=tenant.headers,
    )
    call = await wait_for_end(client, tenant, (await response.get_json())["call_id"])
    assert call["status"] == "failed"
    rows = await delivered(pool, tenant, 2)
    [event] = await events_of(pool, tenant, "call.failed")
    assert event["data"] == {"sub_account_id": str(tenant.id), "call": call}
    assert await events_of(pool, tenant, "call.completed") == []
    assert sorted((str(row["subscription_id"]), str(row["agent_id"])) for row in rows) == sorted(
        [(subscription["id"], "None"), ("None", agent_id)]
    )
    assert {row["message_id"] for row in rows} == {event["id"]}
    assert sorted(r.path for r in receiver.requests) == ["/agent", "/sub"]
    assert {r.headers["webhook-id"] for r in receiver.requests} == {event["id"]}


async def test_unknown_inbound_caller_emits_contact_created_once(client, pool, tenant, worker):
    await answering_agent(client, tenant)
    body = await (await ring(client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER})).get_json()
    await wait_for_end(client, tenant, body["call_id"])
    again = await (await ring(client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER})).get_json()
    assert again["contact_id"] == body["contact_id"]
    await wait_for_end(client, tenant, again["call_id"])
    [event] = await events_of(pool, tenant, "contact.created")
    assert event["data"]["contact"] == await get_contact(client, tenant, body["contact_id"])
    assert event["data"]["contact"]["lead_source"] == "inbound_call"


async def test_inbound_call_of_a_known_caller_emits_no_contact_created(
    client, pool, tenant, worker
):
    await answering_agent(client, tenant)
    await make_contact(client, tenant, phone=BUSY_CALLER)
    body = await (await ring(client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER})).get_json()
    await wait_for_end(client, tenant, body["call_id"])
    assert len(await events_of(pool, tenant, "contact.created")) == 1


async def test_unknown_inbound_sms_sender_emits_contact_created_once(client, pool, tenant):
    for message_id in ("SM1", "SM2"):
        raw = json.dumps({"from": "+14155550149", "body": "hi", "message_id": message_id}).encode()
        response = await client.post(
            f"/webhooks/providers/sandbox/sms/{tenant.id}",
            data=raw,
            headers={HEADER: sign(tenant.id, raw), "Content-Type": "application/json"},
        )
        assert response.status_code < 300, await response.get_data(as_text=True)
    [event] = await events_of(pool, tenant, "contact.created")
    assert event["data"]["contact"]["phone"] == "+14155550149"
    assert event["data"]["contact"]["lead_source"] == "inbound_sms"


async def test_campaign_emits_campaign_completed_once_when_it_finishes(
    client, pool, tenant, mailbox, worker
):
    contacts = [await add_contact(client, tenant) for _ in range(2)]
    campaign = await create_campaign(client, tenant, contact_ids=contacts)
    assert (await schedule(client, tenant, campaign["id"], soon(1))).status_code == 200
    await wait_for_status(client, tenant, campaign["id"], "completed")
    [event] = await events_of(pool, tenant, "campaign.completed")
    assert event["data"]["sub_account_id"] == str(tenant.id)
    shown = await get_campaign(client, tenant, campaign["id"])
    assert event["data"]["campaign"] == shown
    assert shown["status"] == "completed" and shown["contacted"] == 2
