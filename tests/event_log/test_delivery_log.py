"""Delivery logs (a subscription's, an agent's post-call webhook's) and redelivery (CONTRACT 7
"Delivery log and replay", 9)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from integrations.webhooks import new_secret
from tenancy.db import tenant_transaction
from tests.factories import SUBSCRIPTIONS, emit_event, make_agent, subscribe
from tests.helpers import deliveries, expect_error, stored_events, tenant_sql
from tests.receiver import signature_valid, signature_verifies

BASE = "/webhooks/inbound"


def log_of(subscription_id):
    return f"{SUBSCRIPTIONS}/{subscription_id}/deliveries"


def redeliver_path(delivery_id):
    return f"{BASE}/webhook-deliveries/{delivery_id}/redeliver"


async def listed(client, tenant, path):
    response = await client.get(path, headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def emit_post_call(pool, tenant, agent_id, url, secret):
    """A call.completed for the agent's webhook, as finish_call queues it."""
    from api.events import emit, emit_to

    async with tenant_transaction(pool, tenant.schema) as conn:
        event = await emit(conn, "call.completed", {"sub_account_id": str(tenant.id)})
        return await emit_to(conn, event, url, secret, uuid.UUID(agent_id))


# --- GET /webhook-subscriptions/{id}/deliveries -------------------------------------------------


async def test_delivered_delivery_is_listed_with_its_attempts(
    client, pool, tenant, receiver, run_worker
):
    subscription = await subscribe(client, tenant, receiver.url())
    await emit_event(pool, tenant)
    await run_worker()
    body = await listed(client, tenant, log_of(subscription["id"]))
    [event] = await stored_events(pool, tenant)
    [delivery] = body["deliveries"]
    assert list(delivery) == [
        "id",
        "event_id",
        "event_type",
        "status",
        "attempts",
        "next_attempt_at",
    ]
    assert (delivery["event_id"], delivery["event_type"], delivery["status"]) == (
        event["id"],
        "contact.updated",
        "delivered",
    )
    assert delivery["next_attempt_at"] is None
    [attempt] = delivery["attempts"]
    assert (attempt["status_code"], attempt["error"]) == (200, None)
    assert attempt["at"].endswith("Z") and attempt["duration_ms"] >= 0
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (1, 50, 0, False)


async def test_failed_attempts_are_listed_in_order_with_the_next_one(
    client, pool, tenant, receiver, run_worker, worker_env
):
    worker_env(SWITCHBOARD_WEBHOOK_RETRY_SCALE="100")
    subscription = await subscribe(client, tenant, receiver.url())
    receiver.script("/hook", 503)
    await emit_event(pool, tenant)
    await run_worker(max_burst_jobs=1)
    [delivery] = (await listed(client, tenant, log_of(subscription["id"])))["deliveries"]
    assert delivery["status"] == "pending"
    assert [(a["status_code"], a["error"]) for a in delivery["attempts"]] == [(503, None)]
    assert delivery["next_attempt_at"] > delivery["attempts"][0]["at"]


async def test_pending_delivery_shows_when_it_is_tried(client, pool, tenant):
    subscription = await subscribe(client, tenant, "https://example.com/hook")
    await emit_event(pool, tenant)
    [delivery] = (await listed(client, tenant, log_of(subscription["id"])))["deliveries"]
    assert (delivery["status"], delivery["attempts"]) == ("pending", [])
    assert delivery["next_attempt_at"].endswith("Z")


async def test_log_lists_only_that_subscriptions_deliveries_newest_first(client, pool, tenant):
    mine = await subscribe(client, tenant, "https://example.com/mine", ["*"])
    await subscribe(client, tenant, "https://example.com/other", ["*"])
    await emit_event(pool, tenant)
    await emit_event(pool, tenant, "invoice.paid", {"sub_account_id": str(tenant.id)})
    body = await listed(client, tenant, log_of(mine["id"]))
    assert [d["event_type"] for d in body["deliveries"]] == ["invoice.paid", "contact.updated"]
    page = await listed(client, tenant, f"{log_of(mine['id'])}?limit=1&offset=1")
    assert [d["event_type"] for d in page["deliveries"]] == ["contact.updated"]
    assert (page["total"], page["has_more"]) == (2, False)


async def test_deleted_subscriptions_deliveries_stay_readable(client, pool, tenant):
    subscription = await subscribe(client, tenant, "https://example.com/hook")
    await emit_event(pool, tenant)
    response = await client.delete(f"{SUBSCRIPTIONS}/{subscription['id']}", headers=tenant.headers)
    assert response.status_code == 200
    [delivery] = (await listed(client, tenant, log_of(subscription["id"])))["deliveries"]
    assert delivery["status"] == "cancelled"


async def test_log_of_an_unknown_subscription_is_404(client, tenant):
    response = await client.get(log_of(uuid.uuid4()), headers=tenant.headers)
    await expect_error(response, 404, "not_found")


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "limit=x", "offset=-1", "offset=x"])
async def test_log_bad_paging_is_400(client, tenant, query):
    subscription = await subscribe(client, tenant, "https://example.com/hook")
    response = await client.get(f"{log_of(subscription['id'])}?{query}", headers=tenant.headers)
    await expect_error(response, 400, "validation_error")


async def test_log_id_not_uuid_is_400(client, tenant):
    await expect_error(
        await client.get(log_of("nope"), headers=tenant.headers), 400, "invalid_uuid"
    )


# --- POST /webhook-deliveries/{id}/redeliver ----------------------------------------------------


async def test_redelivery_sends_the_same_event_signed_afresh(
    client, pool, tenant, receiver, run_worker
):
    subscription = await subscribe(client, tenant, receiver.url())
    receiver.verify_with("/hook", subscription["secret"])
    await emit_event(pool, tenant)
    await run_worker()
    [first] = (await listed(client, tenant, log_of(subscription["id"])))["deliveries"]
    await asyncio.sleep(1.1)  # the next signature's timestamp is a later second

    response = await client.post(redeliver_path(first["id"]), headers=tenant.headers)

    assert response.status_code == 202, await response.get_data(as_text=True)
    body = await response.get_json()
    again = body["delivery"]
    assert body["status"] == "success"
    assert again["id"] != first["id"]
    assert (again["event_id"], again["event_type"], again["status"], again["attempts"]) == (
        first["event_id"],
        "contact.updated",
        "pending",
        [],
    )
    await run_worker()
    original, replay = receiver.requests
    assert replay.headers["webhook-id"] == original.headers["webhook-id"] == first["event_id"]
    assert replay.body == original.body
    assert int(replay.headers["webhook-timestamp"]) > int(original.headers["webhook-timestamp"])
    assert replay.headers["webhook-signature"] != original.headers["webhook-signature"]
    # As a receiver checks it: the package (with its timestamp tolerance) and by hand.
    assert replay.verified is True and signature_valid(subscription["secret"], replay)
    assert signature_verifies(subscription["secret"], replay.headers, replay.body)
    log = (await listed(client, tenant, log_of(subscription["id"])))["deliveries"]
    assert [(d["id"], d["status"]) for d in log] == [
        (again["id"], "delivered"),
        (first["id"], "delivered"),
    ]
    assert len(await stored_events(pool, tenant)) == 1


async def test_redelivering_a_pending_delivery_is_409_and_writes_nothing(client, pool, tenant):
    subscription = await subscribe(client, tenant, "https://example.com/hook")
    await emit_event(pool, tenant)
    [delivery] = (await listed(client, tenant, log_of(subscription["id"])))["deliveries"]
    response = await client.post(redeliver_path(delivery["id"]), headers=tenant.headers)
    await expect_error(response, 409, "delivery_pending")
    assert len(await deliveries(pool, tenant)) == 1


async def test_redelivering_to_a_deleted_subscription_is_409(client, pool, tenant):
    subscription = await subscribe(client, tenant, "https://example.com/hook")
    await emit_event(pool, tenant)
    await client.delete(f"{SUBSCRIPTIONS}/{subscription['id']}", headers=tenant.headers)
    [delivery] = (await listed(client, tenant, log_of(subscription["id"])))["deliveries"]
    response = await client.post(redeliver_path(delivery["id"]), headers=tenant.headers)
    await expect_error(response, 409, "delivery_target_inactive")
    assert len(await deliveries(pool, tenant)) == 1


async def test_redelivering_an_unknown_delivery_is_404(client, tenant):
    response = await client.post(redeliver_path(uuid.uuid4()), headers=tenant.headers)
    await expect_error(response, 404, "not_found")


async def test_redeliver_id_not_uuid_is_400(client, tenant):
    response = await client.post(redeliver_path("nope"), headers=tenant.headers)
    await expect_error(response, 400, "invalid_uuid")


async def test_redeliver_without_key_is_401(client):
    response = await client.post(redeliver_path(uuid.uuid4()))
    assert response.status_code == 401


# --- GET /agents/{id}/deliveries ------------------------------------------------------------------


async def test_agent_log_lists_its_post_call_deliveries(client, pool, tenant, receiver, run_worker):
    agent_id = await make_agent(client, tenant)
    other_agent = await make_agent(client, tenant, name="Other")
    secret = new_secret()
    delivery_id = await emit_post_call(pool, tenant, agent_id, receiver.url("/agent"), secret)
    await emit_post_call(pool, tenant, other_agent, receiver.url("/other"), new_secret())
    await subscribe(client, tenant, receiver.url("/sub"), ["call.completed"])
    await run_worker()
    body = await listed(client, tenant, f"{BASE}/agents/{agent_id}/deliveries")
    [delivery] = body["deliveries"]
    assert (delivery["id"], delivery["event_type"], delivery["status"]) == (
        str(delivery_id),
        "call.completed",
        "delivered",
    )
    assert [a["status_code"] for a in delivery["attempts"]] == [200]
    # Redelivered to the agent's webhook, signed with its secret, same message id.
    response = await client.post(redeliver_path(delivery_id), headers=tenant.headers)
    assert response.status_code == 202
    await run_worker()
    first, replay = receiver.to("/agent")
    assert replay.headers["webhook-id"] == first.headers["webhook-id"] == delivery["event_id"]
    assert signature_verifies(secret, replay.headers, replay.body)
    assert (await listed(client, tenant, f"{BASE}/agents/{agent_id}/deliveries"))["total"] == 2


async def test_agent_log_of_an_unknown_or_deleted_agent_is_404(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    await emit_post_call(pool, tenant, agent_id, "https://example.com/a", new_secret())
    await tenant_sql(pool, tenant, "UPDATE webhook_deliveries SET status = 'delivered'")
    [delivery] = await deliveries(pool, tenant)
    response = await client.delete(f"{BASE}/agents/{agent_id}", headers=tenant.headers)
    assert response.status_code == 200
    for some_agent in (agent_id, uuid.uuid4()):
        path = f"{BASE}/agents/{some_agent}/deliveries"
        await expect_error(await client.get(path, headers=tenant.headers), 404, "not_found")
    response = await client.post(redeliver_path(delivery["id"]), headers=tenant.headers)
    await expect_error(response, 409, "delivery_target_inactive")


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "offset=-1"])
async def test_agent_log_bad_paging_is_400(client, tenant, query):
    agent_id = await make_agent(client, tenant)
    response = await client.get(
        f"{BASE}/agents/{agent_id}/deliveries?{query}", headers=tenant.headers
    )
    await expect_error(response, 400, "validation_error")


async def test_agent_log_id_not_uuid_is_400(client, tenant):
    response = await client.get(f"{BASE}/agents/nope/deliveries", headers=tenant.headers)
    await expect_error(response, 400, "invalid_uuid")
