"""Signed, retried delivery of outbound events by the worker."""

from __future__ import annotations

import json

from integrations.webhooks import new_secret
from tenancy.clock import iso
from tenancy.db import tenant_transaction
from tests.factories import SUBSCRIPTIONS, emit_event, emit_target, subscribe
from tests.helpers import attempts, deliveries, due_rows, next_attempt_delay, stored_events
from tests.receiver import signature_valid


async def test_delivered_event_is_signed_with_the_subscription_secret(
    client, pool, tenant, receiver, run_worker
):
    subscription = await subscribe(client, tenant, receiver.url())
    receiver.verify_with("/hook", subscription["secret"])
    await emit_event(pool, tenant)
    await run_worker()
    [request] = receiver.requests
    assert request.verified is True
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"].startswith("msg_")
    assert request.headers["webhook-signature"].startswith("v1,")
    assert signature_valid(subscription["secret"], request)
    assert not signature_valid(new_secret(), request)
    body = request.json()
    assert list(body) == ["type", "timestamp", "data"]
    assert body["type"] == "contact.updated"
    assert body["timestamp"].endswith("Z")
    assert body["data"]["sub_account_id"] == str(tenant.id)
    assert body["data"]["changes"] == {"tags": {"added": ["vip"], "removed": []}}


async def test_delivery_and_attempt_are_recorded(client, pool, tenant, receiver, run_worker):
    await subscribe(client, tenant, receiver.url())
    await emit_event(pool, tenant)
    await run_worker()
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"], delivery["last_status_code"]) == (
        "delivered",
        1,
        200,
    )
    assert delivery["message_id"] == receiver.requests[0].headers["webhook-id"]
    [attempt] = await attempts(pool, tenant, delivery["id"])
    assert (attempt["attempt_number"], attempt["status_code"], attempt["error"]) == (1, 200, None)
    assert attempt["duration_ms"] >= 0
    assert await due_rows(pool, [delivery["id"]]) == []


async def test_each_subscription_wanting_the_event_gets_it(
    client, pool, tenant, receiver, run_worker
):
    await subscribe(client, tenant, receiver.url("/a"))
    await subscribe(client, tenant, receiver.url("/b"), ["contact.updated", "call.completed"])
    await subscribe(client, tenant, receiver.url("/calls-only"), ["call.completed"])
    await emit_event(pool, tenant)
    await run_worker()
    assert sorted(r.path for r in receiver.requests) == ["/a", "/b"]
    # One event, one message id for every target.
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1


async def test_no_subscription_means_no_delivery_but_the_event_is_kept(pool, tenant):
    await emit_event(pool, tenant)
    assert await deliveries(pool, tenant) == []
    [event] = await stored_events(pool, tenant)
    assert event["type"] == "contact.updated"
    assert event["id"].startswith("msg_")
    assert event["data"]["changes"] == {"tags": {"added": ["vip"], "removed": []}}


async def test_star_subscription_gets_every_event(client, pool, tenant, receiver, run_worker):
    await subscribe(client, tenant, receiver.url("/all"), ["*"])
    await subscribe(client, tenant, receiver.url("/invoices"), ["invoice.paid"])
    await emit_event(pool, tenant)
    await emit_event(pool, tenant, "campaign.completed", {"sub_account_id": str(tenant.id)})
    await run_worker()
    assert sorted(r.json()["type"] for r in receiver.to("/all")) == [
        "campaign.completed",
        "contact.updated",
    ]
    assert receiver.to("/invoices") == []


async def test_every_target_of_an_event_carries_its_stored_id(
    client, pool, tenant, receiver, run_worker
):
    await subscribe(client, tenant, receiver.url("/sub"), ["call.completed"])
    await emit_target(
        pool, tenant, receiver.url("/agent"), new_secret(), {"sub_account_id": str(tenant.id)}
    )
    await run_worker()
    [event] = await stored_events(pool, tenant)
    assert sorted(r.path for r in receiver.requests) == ["/agent", "/sub"]
    assert {r.headers["webhook-id"] for r in receiver.requests} == {event["id"]}
    assert {r.json()["timestamp"] for r in receiver.requests} == {iso(event["timestamp"])}


async def test_event_of_another_tenant_is_not_delivered_to_this_one(
    client, pool, tenant, tenant_second, receiver, run_worker
):
    await subscribe(client, tenant, receiver.url("/mine"))
    await emit_event(pool, tenant_second)
    await run_worker()
    assert receiver.requests == []


async def test_rolled_back_emit_is_never_sent(client, pool, tenant, receiver, run_worker):
    await subscribe(client, tenant, receiver.url())
    try:
        async with tenant_transaction(pool, tenant.schema) as conn:
            from api.events import emit

            await emit(conn, "contact.updated", {"sub_account_id": str(tenant.id)})
            raise RuntimeError("the caller's change failed")
    except RuntimeError:
        pass
    await run_worker()
    assert receiver.requests == []
    assert await deliveries(pool, tenant) == []
    assert await stored_events(pool, tenant) == []


async def test_failing_receiver_is_retried_until_it_succeeds(
    client, pool, tenant, receiver, run_worker, worker_env
):
    # Delays 20 ms, then 1.2 s; a 1 s timeout: every attempt falls in a later second.
    worker_env(SWITCHBOARD_WEBHOOK_RETRY_SCALE="0.004", SWITCHBOARD_WEBHOOK_TIMEOUT_SECONDS="1")
    subscription = await subscribe(client, tenant, receiver.url())
    receiver.verify_with("/hook", subscription["secret"])
    receiver.script("/hook", ("sleep", 2.5), 500)
    await emit_event(pool, tenant)
    await run_worker()
    assert len(receiver.requests) == 3
    # Each attempt verifies on arrival (standardwebhooks: signature and timestamp tolerance).
    assert [r.verified for r in receiver.requests] == [True, True, True]
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1
    assert len({r.body for r in receiver.requests}) == 1
    stamps = [int(r.headers["webhook-timestamp"]) for r in receiver.requests]
    assert stamps == sorted(set(stamps)), "each attempt is signed with a fresh timestamp"
    assert len({r.headers["webhook-signature"] for r in receiver.requests}) == 3
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"]) == ("delivered", 3)
    recorded = await attempts(pool, tenant, delivery["id"])
    assert [(a["attempt_number"], a["status_code"], a["error"]) for a in recorded] == [
        (1, None, "timeout"),
        (2, 500, None),
        (3, 200, None),
    ]
    assert recorded[0]["duration_ms"] >= 900


async def test_unresolvable_host_is_a_failed_attempt_retried_on_the_schedule(
    client, pool, tenant, run_worker, worker_env, dns
):
    worker_env(SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS="false", SWITCHBOARD_WEBHOOK_RETRY_SCALE="0.2")
    await subscribe(client, tenant, "http://no-such-host.switchboard.test/hook")
    await emit_event(pool, tenant)
    await run_worker(max_burst_jobs=1)
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"]) == ("pending", 1)
    [first] = await attempts(pool, tenant, delivery["id"])
    assert first["status_code"] is None
    assert first["error"].startswith("dns_error")
    wait = await next_attempt_delay(pool, tenant, delivery["id"])
    assert 0.8 <= wait <= 1.3, "the second attempt comes 5 s x scale after the first"
    worker_env(SWITCHBOARD_WEBHOOK_RETRY_SCALE="0.00001")
    await run_worker()
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"]) == ("failed", 8)
    recorded = await attempts(pool, tenant, delivery["id"])
    assert [a["attempt_number"] for a in recorded] == list(range(1, 9))
    assert all(a["error"].startswith("dns_error") for a in recorded)
    assert await due_rows(pool, [delivery["id"]]) == []


async def test_gives_up_after_eight_attempts(
    client, pool, tenant, receiver, run_worker, worker_env
):
    worker_env(SWITCHBOARD_WEBHOOK_RETRY_SCALE="0.00001")
    await subscribe(client, tenant, receiver.url())
    receiver.script("/hook", *([503] * 20))
    await emit_event(pool, tenant)
    await run_worker()
    assert len(receiver.requests) == 8
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"], delivery["last_status_code"]) == (
        "failed",
        8,
        503,
    )
    assert [a["attempt_number"] for a in await attempts(pool, tenant, delivery["id"])] == list(
        range(1, 9)
    )
    assert await due_rows(pool, [delivery["id"]]) == []


async def test_unreachable_receiver_is_recorded_and_retried(
    client, pool, tenant, receiver, run_worker, worker_env
):
    worker_env(SWITCHBOARD_WEBHOOK_RETRY_SCALE="0.00001")
    port = receiver.port
    await receiver.stop()
    await subscribe(client, tenant, f"http://127.0.0.1:{port}/hook")
    await emit_event(pool, tenant)
    await run_worker()
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["attempt_count"]) == ("failed", 8)
    recorded = await attempts(pool, tenant, delivery["id"])
    assert all(a["status_code"] is None and a["error"] for a in recorded)


async def test_410_disables_the_subscription(client, pool, tenant, receiver, run_worker):
    subscription = await subscribe(client, tenant, receiver.url())
    receiver.script("/hook", 410)
    await emit_event(pool, tenant)
    await run_worker()
    assert len(receiver.requests) == 1
    [delivery] = await deliveries(pool, tenant)
    assert (delivery["status"], delivery["last_status_code"]) == ("failed", 410)
    listed = await (await client.get(SUBSCRIPTIONS, headers=tenant.headers)).get_json()
    [shown] = listed["subscriptions"]
    assert (shown["id"], shown["is_active"], shown["disabled_reason"]) == (
        subscription["id"],
        False,
        "gone",
    )
    await emit_event(pool, tenant)
    await run_worker()
    assert len(receiver.requests) == 1
    assert len(await deliveries(pool, tenant)) == 1


async def test_redirect_is_not_followed(client, pool, tenant, receiver, run_worker):
    await subscribe(client, tenant, receiver.url("/hook"))
    receiver.script("/hook", (302, {"location": receiver.url("/elsewhere")}))
    await emit_event(pool, tenant)
    await run_worker()
    assert receiver.to("/elsewhere") == []
    assert len(receiver.to("/hook")) == 2
    [delivery] = await deliveries(pool, tenant)
    recorded = await attempts(pool, tenant, delivery["id"])
    assert [a["status_code"] for a in recorded] == [302, 200]


async def test_private_target_is_refused_at_send_when_not_allowed(
    client, pool, tenant, receiver, run_worker, worker_env
):
    await subscribe(client, tenant, receiver.url())
    await emit_event(pool, tenant)
    worker_env(SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS="false")
    await run_worker()
    assert receiver.requests == []
    [delivery] = await deliveries(pool, tenant)
    assert delivery["status"] == "failed"
    [attempt] = await attempts(pool, tenant, delivery["id"])
    assert attempt["status_code"] is None
    assert attempt["error"].startswith("target_not_allowed")


async def test_deleted_subscription_gets_no_pending_delivery(
    client, pool, tenant, receiver, run_worker
):
    subscription = await subscribe(client, tenant, receiver.url())
    await emit_event(pool, tenant)
    await client.delete(f"{SUBSCRIPTIONS}/{subscription['id']}", headers=tenant.headers)
    await run_worker()
    assert receiver.requests == []
    [delivery] = await deliveries(pool, tenant)
    assert delivery["status"] == "cancelled"
    assert await due_rows(pool, [delivery["id"]]) == []


async def test_emit_to_explicit_target_is_signed_with_its_secret(
    pool, tenant, receiver, run_worker
):
    secret = new_secret()
    call = {"id": "3d0c1f5e-8a4e-4a47-9c61-1b3b6c1b2a10", "status": "completed"}
    delivery_id = await emit_target(
        pool,
        tenant,
        receiver.url("/agent"),
        secret,
        {"sub_account_id": str(tenant.id), "call": call},
    )
    await run_worker()
    [request] = receiver.requests
    assert request.path == "/agent"
    assert signature_valid(secret, request)
    body = json.loads(request.body)
    assert (body["type"], body["data"]["call"]) == ("call.completed", call)
    [attempt] = await attempts(pool, tenant, delivery_id)
    assert attempt["status_code"] == 200
