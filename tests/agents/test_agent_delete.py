"""DELETE /agents/{id}: refused while the agent is in use, then 404 everywhere; calls keep it."""

from __future__ import annotations

import asyncio
import uuid

from tenancy.db import tenant_transaction
from tests.factories import assign, import_number, insert_contact, make_agent, make_contact
from tests.helpers import expect_error, tenant_sql

AGENTS = "/webhooks/inbound/agents"


async def delete(client, tenant, agent_id):
    return await client.delete(f"{AGENTS}/{agent_id}", headers=tenant.headers)


async def insert_call(pool, tenant, agent_id, status):
    contact_id = await insert_contact(pool, tenant)
    rows = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, provider, status)"
        " VALUES ($1, $2, '+14155550123', '+14155552671', 'sandbox', $3) RETURNING id",
        contact_id,
        uuid.UUID(agent_id),
        status,
    )
    return rows[0]["id"]


async def deleted_at(pool, tenant, agent_id):
    rows = await tenant_sql(
        pool, tenant, "SELECT deleted_at FROM agents WHERE id = $1", uuid.UUID(agent_id)
    )
    return rows[0]["deleted_at"]


async def pool_of(client, tenant, number):
    number_id = await import_number(client, tenant, number)
    response = await client.post(
        "/webhooks/inbound/number-pools",
        headers=tenant.headers,
        json={"name": "Outbound", "phone_number_ids": [number_id]},
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["pool"]["id"]


async def place(client, tenant, contact_id, agent_id, pool_id):
    return await client.post(
        f"/webhooks/inbound/contacts/{contact_id}/call",
        json={"agent_id": agent_id, "pool_id": pool_id},
        headers=tenant.headers,
    )


async def test_delete_agent_is_200_and_marks_it_deleted(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    response = await delete(client, tenant, agent_id)
    assert response.status_code == 200
    assert await response.get_json() == {"status": "success", "deleted": True, "agent_id": agent_id}
    assert await deleted_at(pool, tenant, agent_id) is not None


async def test_deleted_agent_is_404_on_get_patch_and_delete_and_left_out_of_the_list(
    client, tenant
):
    kept = await make_agent(client, tenant, name="Kept")
    agent_id = await make_agent(client, tenant)
    assert (await delete(client, tenant, agent_id)).status_code == 200
    await expect_error(
        await client.get(f"{AGENTS}/{agent_id}", headers=tenant.headers), 404, "not_found"
    )
    await expect_error(
        await client.patch(
            f"{AGENTS}/{agent_id}", json={"is_active": True}, headers=tenant.headers
        ),
        404,
        "not_found",
    )
    await expect_error(await delete(client, tenant, agent_id), 404, "not_found")
    listed = await (await client.get(AGENTS, headers=tenant.headers)).get_json()
    assert [agent["id"] for agent in listed["agents"]] == [kept]
    assert listed["total"] == 1


async def test_delete_agent_with_an_assigned_number_is_409(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155550123")
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    await expect_error(await delete(client, tenant, agent_id), 409, "agent_in_use")
    assert await deleted_at(pool, tenant, agent_id) is None


async def test_delete_agent_whose_number_was_released_is_200(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155550124")
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    released = await client.delete(
        f"/webhooks/inbound/phone-numbers/{number_id}", headers=tenant.headers
    )
    assert released.status_code == 200
    assert (await delete(client, tenant, agent_id)).status_code == 200


async def test_delete_agent_with_a_call_not_ended_is_409(client, pool, tenant):
    for status in ("scheduled", "queued", "ringing", "in_progress"):
        agent_id = await make_agent(client, tenant)
        await insert_call(pool, tenant, agent_id, status)
        await expect_error(await delete(client, tenant, agent_id), 409, "agent_in_use")
        assert await deleted_at(pool, tenant, agent_id) is None


async def test_delete_agent_of_an_unfinished_call_campaign_is_409_until_it_is_cancelled(
    client, pool, tenant
):
    agent_id = await make_agent(client, tenant)
    contact_id = await make_contact(client, tenant)
    created = await client.post(
        "/webhooks/inbound/campaigns",
        headers=tenant.headers,
        json={
            "name": "Follow-up",
            "campaign_type": "call",
            "agent_id": agent_id,
            "contact_ids": [contact_id],
        },
    )
    assert created.status_code == 201, await created.get_data(as_text=True)
    campaign_id = (await created.get_json())["campaign"]["id"]
    await expect_error(await delete(client, tenant, agent_id), 409, "agent_in_use")
    assert await deleted_at(pool, tenant, agent_id) is None
    cancelled = await client.post(
        f"/webhooks/inbound/campaigns/{campaign_id}/cancel", headers=tenant.headers
    )
    assert cancelled.status_code == 200, await cancelled.get_data(as_text=True)
    assert (await delete(client, tenant, agent_id)).status_code == 200


async def test_deleted_agent_calls_keep_their_agent_id(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    call_id = await insert_call(pool, tenant, agent_id, "completed")
    assert (await delete(client, tenant, agent_id)).status_code == 200
    call = await client.get(f"/webhooks/inbound/calls/{call_id}", headers=tenant.headers)
    assert call.status_code == 200
    assert (await call.get_json())["call"]["agent_id"] == agent_id


async def test_deleted_agent_cannot_be_given_a_number(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    assert (await delete(client, tenant, agent_id)).status_code == 200
    number_id = await import_number(client, tenant, "+14155550125")
    await expect_error(await assign(client, tenant, number_id, agent_id), 404, "not_found")
    rows = await tenant_sql(pool, tenant, "SELECT agent_id FROM phone_numbers")
    assert [row["agent_id"] for row in rows] == [None]


async def test_deleted_agent_cannot_place_a_call(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    pool_id = await pool_of(client, tenant, "+14155550126")
    contact_id = await make_contact(client, tenant)
    assert (await delete(client, tenant, agent_id)).status_code == 200
    await expect_error(await place(client, tenant, contact_id, agent_id, pool_id), 404, "not_found")
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []


async def test_delete_agent_of_another_sub_account_is_404(client, pool, tenant, tenant_second):
    other = await make_agent(client, tenant_second)
    await expect_error(await delete(client, tenant, other), 404, "not_found")
    assert await deleted_at(pool, tenant_second, other) is None


async def test_delete_agent_invalid_id_is_400(client, tenant):
    await expect_error(await delete(client, tenant, "nope"), 400, "invalid_uuid")


# --- a deletion racing a call or an assignment ----------------------------------------------------


async def test_call_placed_while_a_deletion_holds_the_agent_finds_it_gone(
    client, pool, tenant, worker
):
    agent_id = await make_agent(client, tenant)
    pool_id = await pool_of(client, tenant, "+14155550127")
    contact_id = await make_contact(client, tenant)
    async with tenant_transaction(pool, tenant.schema) as conn:
        # What DELETE does: the agent row locked FOR UPDATE, then marked deleted.
        await conn.execute("SELECT id FROM agents WHERE id = $1 FOR UPDATE", uuid.UUID(agent_id))
        placing = asyncio.ensure_future(place(client, tenant, contact_id, agent_id, pool_id))
        await asyncio.sleep(0.5)
        assert not placing.done()
        await conn.execute(
            "UPDATE agents SET deleted_at = now() WHERE id = $1", uuid.UUID(agent_id)
        )
    await expect_error(await placing, 404, "not_found")
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []


async def test_delete_racing_call_placement_never_leaves_a_call_on_a_deleted_agent(
    client, pool, tenant, worker
):
    pool_id = await pool_of(client, tenant, "+14155550128")
    contact_id = await make_contact(client, tenant)
    for _ in range(8):
        agent_id = await make_agent(client, tenant)
        placed, deleted = await asyncio.gather(
            place(client, tenant, contact_id, agent_id, pool_id), delete(client, tenant, agent_id)
        )
        assert (placed.status_code, deleted.status_code) in ((200, 409), (404, 200))
        calls = await tenant_sql(
            pool, tenant, "SELECT id FROM calls WHERE agent_id = $1", uuid.UUID(agent_id)
        )
        gone = await deleted_at(pool, tenant, agent_id) is not None
        assert len(calls) == (0 if gone else 1)


async def test_delete_racing_number_assignment_never_leaves_a_number_on_a_deleted_agent(
    client, pool, tenant, worker
):
    for n in range(4):
        agent_id = await make_agent(client, tenant)
        number_id = await import_number(client, tenant, f"+1415555014{n}")
        assigned, deleted = await asyncio.gather(
            assign(client, tenant, number_id, agent_id), delete(client, tenant, agent_id)
        )
        assert (assigned.status_code, deleted.status_code) in ((200, 409), (404, 200))
        rows = await tenant_sql(
            pool,
            tenant,
            "SELECT p.agent_id FROM phone_numbers AS p JOIN agents AS a"
            " ON a.id = p.agent_id WHERE a.deleted_at IS NOT NULL",
        )
        assert rows == []
