"""GET /calls: newest first, filters contact_id, agent_id, status and direction (AND), each
item as GET /calls/{id} shows it."""

from __future__ import annotations

import uuid

from tests.factories import BASE, make_agent, make_contact
from tests.helpers import tenant_sql

CALLS = f"{BASE}/calls"

# Calls as the worker and the carrier leave them (placing real ones needs the voice runtime;
# tests/calls/test_calls.py does that).
INSERT_CALL = """
INSERT INTO calls (contact_id, agent_id, from_number, to_number, status, direction, provider,
                   duration_seconds, transcript, ended_reason)
VALUES ($1, $2, '+14155550100', '+14155552671', $3, $4, 'sandbox', $5, $6, $7)
RETURNING id
"""


async def insert_call(pool, tenant, contact_id, agent_id, status="completed", direction="outbound"):
    ended = status in ("completed", "failed")
    rows = await tenant_sql(
        pool,
        tenant,
        INSERT_CALL,
        uuid.UUID(contact_id),
        uuid.UUID(agent_id),
        status,
        direction,
        42 if ended else None,
        "Hello?" if ended else None,
        {"completed": "customer_hangup", "failed": "no_answer"}.get(status),
    )
    return str(rows[0]["id"])


async def listed(client, tenant, query=""):
    response = await client.get(f"{CALLS}{query}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def test_items_are_shaped_as_the_single_read(client, pool, tenant):
    call_id = await insert_call(
        pool, tenant, await make_contact(client, tenant), await make_agent(client, tenant)
    )
    single = await (await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)).get_json()
    body = await listed(client, tenant)
    assert body["calls"] == [single["call"]] and body["total"] == 1


async def test_each_filter_and_their_combination(client, pool, tenant):
    ada = await make_contact(client, tenant, phone="+14155550111")
    bob = await make_contact(client, tenant, phone="+14155550112")
    sales, support = await make_agent(client, tenant), await make_agent(client, tenant)
    first = await insert_call(pool, tenant, ada, sales, "completed")
    second = await insert_call(pool, tenant, ada, support, "failed")
    third = await insert_call(pool, tenant, bob, sales, "queued")
    fourth = await insert_call(pool, tenant, bob, sales, "completed", direction="inbound")

    async def ids(query):
        body = await listed(client, tenant, query)
        assert body["total"] == len(body["calls"])
        return [call["id"] for call in body["calls"]]

    assert await ids("") == [fourth, third, second, first]
    assert await ids(f"?contact_id={ada}") == [second, first]
    assert await ids(f"?agent_id={sales}") == [fourth, third, first]
    assert await ids("?status=completed") == [fourth, first]
    assert await ids("?direction=inbound") == [fourth]
    assert await ids("?direction=outbound&status=completed") == [first]
    assert await ids(f"?contact_id={bob}&agent_id={sales}&status=queued&direction=outbound") == [
        third
    ]
    assert await ids(f"?contact_id={bob}&agent_id={support}") == []


async def test_another_sub_accounts_calls_are_not_listed_even_by_their_ids(
    client, pool, tenant, tenant_second
):
    contact_id = await make_contact(client, tenant_second)
    agent_id = await make_agent(client, tenant_second)
    await insert_call(pool, tenant_second, contact_id, agent_id)
    for query in ("", f"?contact_id={contact_id}", f"?agent_id={agent_id}"):
        body = await listed(client, tenant, query)
        assert (body["calls"], body["total"]) == ([], 0)
