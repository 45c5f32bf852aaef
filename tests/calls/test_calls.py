"""Outbound AI calls: the refusals, the lifecycle, charging, round robin and the webhook."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
import wave
from collections import Counter
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest

from api.calls.service import advance_call, finish_call
from integrations.telephony import CallState
from integrations.webhooks import sign
from tests.factories import assign, import_number, make_agent, make_contact, priced_tenant
from tests.helpers import balance, expect_error, scope_of, tenant_sql

CALLS = "/webhooks/inbound/calls"
WAIT_SECONDS = 90
# A sandbox contact that is busy (CONTRACT 6): the call ends at once, without a conversation.
BUSY = "+14155550187"


def call_url(contact_id):
    return f"/webhooks/inbound/contacts/{contact_id}/call"


async def call_count(pool, tenant):
    return (await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM calls"))[0]["n"]


async def ready_agent(client, tenant, number="+14155550123", **overrides):
    """An agent with a number assigned, and a contact with a phone."""
    agent_id = await make_agent(client, tenant, **overrides)
    number_id = await import_number(client, tenant, number)
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    return agent_id, await make_contact(client, tenant)


async def place(client, tenant, contact_id, agent_id, **extra):
    return await client.post(
        call_url(contact_id), json={"agent_id": agent_id, **extra}, headers=tenant.headers
    )


async def wait_for_end(client, tenant, call_id):
    for _ in range(WAIT_SECONDS * 10):
        body = await (await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)).get_json()
        if body["call"]["status"] in ("completed", "failed"):
            return body["call"]
        await asyncio.sleep(0.1)
    raise AssertionError(f"call {call_id} never ended: {body}")


# --- a call's life ----------------------------------------------------------------------------


async def test_call_is_placed_and_completes_with_transcript_and_recording(client, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant)
    response = await place(client, tenant, contact_id, agent_id)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success" and body["message"]
    call_id = body["call_id"]
    first = (await (await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)).get_json())[
        "call"
    ]
    assert first["status"] in ("queued", "ringing", "in_progress", "completed")
    assert first["from_number"] == "+14155550123"
    assert first["to_number"] == "+14155552671"
    call = await wait_for_end(client, tenant, call_id)
    assert call["status"] == "completed"
    assert call["id"] == call_id and call["contact_id"] == contact_id
    assert call["agent_id"] == agent_id
    assert call["duration_seconds"] >= 1
    # The sandbox's person script against the fake vendors' default reply (CONTRACT 6).
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
    assert call["direction"] == "outbound" and call["ended_reason"] == "customer_hangup"
    assert call["answered_by"] == "human" and call["error"] is None and call["cost"] == 0
    assert [m["role"] for m in call["messages"]] == ["contact", "agent"] * 3 + ["contact"]
    # The recording: both sides of the whole call, at a signed link that needs no key.
    link = urlsplit(call["recording_url"])
    recording = await client.get(f"{link.path}?{link.query}")
    assert recording.status_code == 200 and recording.mimetype == "audio/wav"
    with wave.open(io.BytesIO(await recording.get_data())) as wav:
        seconds = wav.getnframes() / wav.getframerate()
    assert abs(seconds - call["duration_seconds"]) <= 2
    assert call["started_at"] <= call["ended_at"]


async def test_call_without_recording_has_no_recording_url(client, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant, recording=False)
    call_id = (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
    call = await wait_for_end(client, tenant, call_id)
    assert call["status"] == "completed" and call["recording_url"] is None


async def test_completed_call_is_charged_per_started_minute(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, credit=10, call_per_minute=0.25)
    agent_id, contact_id = await ready_agent(client, tenant)
    call_id = (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
    await wait_for_end(client, tenant, call_id)
    assert await balance(pool, tenant) == 9.75
    ledger = await tenant_sql(
        pool,
        tenant,
        "SELECT amount, reference_id FROM wallet_transactions WHERE reference_type = 'call'",
    )
    assert [(float(r["amount"]), str(r["reference_id"])) for r in ledger] == [(-0.25, call_id)]
    row = (await tenant_sql(pool, tenant, "SELECT billed_minutes FROM calls"))[0]
    assert row["billed_minutes"] == 1


async def test_call_the_wallet_cannot_cover_is_402_and_not_placed(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, call_per_minute=0.25)
    agent_id, contact_id = await ready_agent(client, tenant)
    await expect_error(await place(client, tenant, contact_id, agent_id), 402, "insufficient_funds")
    assert await call_count(pool, tenant) == 0


class LineClosed:
    """A carrier whose line to the contact has closed (the sandbox's and Twilio's report once
    the contact hangs up), before the voice runtime has sent the call's record."""

    name = "sandbox"

    def get(self, _name=None):
        return self

    async def call_state(self, _provider_call_id):
        return CallState(
            "failed",
            ended_at=datetime.now(UTC),
            ended_reason="failed",
            error="voice_unavailable: the voice runtime left the call without its record",
        )


async def test_the_carriers_end_does_not_end_a_call_the_runtime_still_records(
    client, pool, tenant, worker
):
    """The worker reads the carrier between the contact hanging up and the runtime's record:
    that read must not end the call, or the record (transcript, charge, webhook) is lost."""
    agent_id, contact_id = await ready_agent(
        client, tenant, webhook=True, webhook_url="https://hooks.example.com/calls"
    )
    # A call the runtime answered, as the worker finds it (written here: no due work follows
    # it but this test's own steps).
    [call] = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, "
        "provider, status, provider_call_id, answered_by, started_at) VALUES ($1, $2, "
        "'+14155550123', '+14155550199', 'sandbox', 'in_progress', 'CA-line', 'human', now()) "
        "RETURNING id",
        uuid.UUID(contact_id),
        uuid.UUID(agent_id),
    )
    call_id = call["id"]
    scope = scope_of(pool, tenant)

    look_again = await advance_call(scope, LineClosed(), call_id)

    assert look_again is not None
    [row] = await tenant_sql(pool, tenant, "SELECT status FROM calls")
    assert row["status"] == "in_progress"
    await finish_call(
        scope,
        call_id,
        CallState(
            "completed",
            started_at=datetime.now(UTC),
            ended_at=datetime.now(UTC),
            duration_seconds=12,
            transcript="Agent: Hello",
            ended_reason="customer_hangup",
            answered_by="human",
        ),
    )
    [row] = await tenant_sql(pool, tenant, "SELECT status, transcript FROM calls")
    assert (row["status"], row["transcript"]) == ("completed", "Agent: Hello")
    [delivery] = await tenant_sql(
        pool, tenant, "SELECT event_type, target_url FROM webhook_deliveries"
    )
    assert tuple(delivery) == ("call.completed", "https://hooks.example.com/calls")


async def wait_for_delivery(pool, tenant, receiver):
    """Until the receiver has a POST; if none comes, fail with what the deliveries recorded."""
    try:
        await asyncio.wait_for(receiver.arrived.wait(), timeout=WAIT_SECONDS)
    except TimeoutError:
        deliveries = await tenant_sql(
            pool,
            tenant,
            "SELECT d.status, d.attempt_count, d.next_attempt_at, d.last_error, "
            "array_agg(a.error) AS errors FROM webhook_deliveries AS d "
            "LEFT JOIN webhook_attempts AS a ON a.delivery_id = d.id GROUP BY d.id",
        )
        due = await tenant_sql(
            pool, tenant, "SELECT kind, status, due_at, attempts, last_error FROM control.due_work"
        )
        raise AssertionError(
            f"no delivery arrived: {[dict(r) for r in deliveries]}, "
            f"due work {[dict(r) for r in due]}"
        ) from None


async def test_post_call_webhook_arrives_signed(client, pool, tenant, worker, receiver):
    agent_id, contact_id = await ready_agent(client, tenant, webhook=True, webhook_url=receiver.url)
    call_id = (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
    call = await wait_for_end(client, tenant, call_id)
    await wait_for_delivery(pool, tenant, receiver)
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    agent = (
        await (
            await client.get(f"/webhooks/inbound/agents/{agent_id}", headers=tenant.headers)
        ).get_json()
    )["agent"]
    expected = sign(
        agent["webhook_secret"],
        headers["webhook-id"],
        int(headers["webhook-timestamp"]),
        body.decode(),
    )
    assert headers["webhook-signature"] == expected
    payload = json.loads(body)
    assert payload["type"] == "call.completed"
    assert payload["data"]["sub_account_id"] == str(tenant.id)
    # The recording link is signed afresh for each read (its expiry counts from then).
    sent, read = payload["data"]["call"], dict(call)
    assert urlsplit(sent.pop("recording_url")).path == urlsplit(read.pop("recording_url")).path
    assert sent == read


async def test_agent_without_webhook_sends_none(client, pool, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant)
    call_id = (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
    await wait_for_end(client, tenant, call_id)
    rows = await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM webhook_deliveries")
    assert rows[0]["n"] == 0


async def test_contact_with_a_call_cannot_be_deleted(client, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant)
    call_id = (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
    await wait_for_end(client, tenant, call_id)
    response = await client.delete(
        f"/webhooks/inbound/contacts/{contact_id}", headers=tenant.headers
    )
    assert response.status_code == 409


# --- round robin ------------------------------------------------------------------------------


async def test_pool_spreads_50_concurrent_calls_evenly(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    numbers = [f"+1415555{n:04d}" for n in range(110, 115)]
    number_ids = [await import_number(client, tenant, number) for number in numbers]
    created = await client.post(
        "/webhooks/inbound/number-pools",
        json={"name": "Outbound", "phone_number_ids": number_ids},
        headers=tenant.headers,
    )
    pool_id = (await created.get_json())["pool"]["id"]
    contact_id = await make_contact(client, tenant, phone=BUSY)
    responses = await asyncio.gather(
        *[place(client, tenant, contact_id, agent_id, pool_id=pool_id) for _ in range(50)]
    )
    assert [r.status_code for r in responses] == [200] * 50
    rows = await tenant_sql(pool, tenant, "SELECT id, from_number FROM calls")
    assert Counter(r["from_number"] for r in rows) == {number: 10 for number in numbers}
    for row in rows:
        await wait_for_end(client, tenant, row["id"])


async def test_pool_caller_ids_follow_the_pool_order(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    numbers = ["+14155550120", "+14155550121"]
    number_ids = [await import_number(client, tenant, number) for number in numbers]
    created = await client.post(
        "/webhooks/inbound/number-pools",
        json={"name": "Pair", "phone_number_ids": number_ids},
        headers=tenant.headers,
    )
    pool_id = (await created.get_json())["pool"]["id"]
    contact_id = await make_contact(client, tenant, phone=BUSY)
    ids = []
    for _ in range(4):
        response = await place(client, tenant, contact_id, agent_id, pool_id=pool_id)
        ids.append((await response.get_json())["call_id"])
    froms = []
    for call_id in ids:
        call = await wait_for_end(client, tenant, call_id)
        froms.append(call["from_number"])
    assert froms == numbers * 2


async def test_pool_whose_numbers_were_released_is_400(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155550120")
    created = await client.post(
        "/webhooks/inbound/number-pools",
        json={"name": "Gone", "phone_number_ids": [number_id]},
        headers=tenant.headers,
    )
    pool_id = (await created.get_json())["pool"]["id"]
    assert (
        await client.delete(f"/webhooks/inbound/phone-numbers/{number_id}", headers=tenant.headers)
    ).status_code == 200
    contact_id = await make_contact(client, tenant)
    await expect_error(
        await place(client, tenant, contact_id, agent_id, pool_id=pool_id), 400, "number_pool_empty"
    )
    assert await call_count(pool, tenant) == 0


# --- refusals ---------------------------------------------------------------------------------


async def test_call_invalid_contact_id_is_400(client, tenant):
    response = await client.post(
        call_url("nope"), json={"agent_id": str(uuid.uuid4())}, headers=tenant.headers
    )
    await expect_error(response, 400, "invalid_uuid")


@pytest.mark.parametrize(
    "body", [{"agent_id": "nope"}, {"agent_id": str(uuid.uuid4()), "pool_id": "nope"}]
)
async def test_call_invalid_agent_or_pool_id_is_400(client, tenant, body):
    response = await client.post(call_url(uuid.uuid4()), json=body, headers=tenant.headers)
    await expect_error(response, 400, "invalid_uuid")


@pytest.mark.parametrize("body", [{}, {"agent_id": 5}, {"agent_id": None}])
async def test_call_missing_agent_id_is_400(client, tenant, body):
    response = await client.post(call_url(uuid.uuid4()), json=body, headers=tenant.headers)
    await expect_error(response, 400, "validation_error")


async def test_call_contact_without_phone_is_400(client, pool, tenant, worker):
    agent_id, _ = await ready_agent(client, tenant)
    contact_id = await make_contact(client, tenant, phone=None)
    await expect_error(
        await place(client, tenant, contact_id, agent_id), 400, "contact_has_no_phone"
    )
    assert await call_count(pool, tenant) == 0


async def test_call_missing_contact_or_agent_is_404(client, pool, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant)
    await expect_error(await place(client, tenant, str(uuid.uuid4()), agent_id), 404, "not_found")
    await expect_error(await place(client, tenant, contact_id, str(uuid.uuid4())), 404, "not_found")
    await expect_error(
        await place(client, tenant, contact_id, agent_id, pool_id=str(uuid.uuid4())),
        404,
        "not_found",
    )
    assert await call_count(pool, tenant) == 0


async def test_call_inactive_agent_is_400(client, pool, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant, is_active=False)
    await expect_error(await place(client, tenant, contact_id, agent_id), 400, "agent_inactive")
    assert await call_count(pool, tenant) == 0


async def test_call_agent_without_number_and_no_pool_is_400(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    contact_id = await make_contact(client, tenant)
    await expect_error(
        await place(client, tenant, contact_id, agent_id), 400, "agent_has_no_number"
    )
    assert await call_count(pool, tenant) == 0


async def test_call_with_another_sub_accounts_records_is_404(
    client, pool, tenant, tenant_second, worker
):
    agent_id, contact_id = await ready_agent(client, tenant)
    their_agent, their_contact = await ready_agent(client, tenant_second, "+14155550124")
    their_number = await import_number(client, tenant_second, "+14155550177")
    created = await client.post(
        "/webhooks/inbound/number-pools",
        json={"name": "Theirs", "phone_number_ids": [their_number]},
        headers=tenant_second.headers,
    )
    their_pool = (await created.get_json())["pool"]["id"]
    await expect_error(await place(client, tenant, their_contact, agent_id), 404, "not_found")
    await expect_error(await place(client, tenant, contact_id, their_agent), 404, "not_found")
    await expect_error(
        await place(client, tenant, contact_id, agent_id, pool_id=their_pool), 404, "not_found"
    )
    assert await call_count(pool, tenant) == 0
    assert await call_count(pool, tenant_second) == 0
    # And their calls are not ours to read.
    their_call = (
        await (await place(client, tenant_second, their_contact, their_agent)).get_json()
    )["call_id"]
    await expect_error(
        await client.get(f"{CALLS}/{their_call}", headers=tenant.headers), 404, "not_found"
    )
    await wait_for_end(client, tenant_second, their_call)


async def test_get_call_invalid_id_is_400_and_missing_is_404(client, tenant):
    await expect_error(await client.get(f"{CALLS}/x", headers=tenant.headers), 400, "invalid_uuid")
    await expect_error(
        await client.get(f"{CALLS}/{uuid.uuid4()}", headers=tenant.headers), 404, "not_found"
    )
