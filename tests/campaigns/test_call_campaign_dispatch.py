"""Call campaigns dispatched by the real worker through the sandbox carrier (CONTRACT 10): every
recipient called once per attempt, at the campaign's concurrency, inside its window, retried as
its policy says, settled with its outcome; cancel, low funds and a lost Redis."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tests.campaigns.call_campaigns import (
    BUSY,
    CAMPAIGNS,
    NO_ANSWER,
    callee,
    callees,
    calling_agent,
    calls_per_contact,
    campaign_calls,
    create_call_campaign,
    recipients_of,
    sampled_until_completed,
    until_on_the_line,
    wait_for,
)
from tests.factories import (
    create_contact,
    create_plan,
    credit,
    make_contact,
    make_tenant,
    priced_tenant,
)
from tests.helpers import get_campaign, schedule, soon, stored_events, tenant_sql

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


async def start(client, tenant, campaign_id, seconds=0.5):
    response = await schedule(client, tenant, campaign_id, soon(seconds))
    assert response.status_code == 200, await response.get_data(as_text=True)


async def test_every_recipient_is_called_and_settled_with_its_outcome(client, pool, tenant, worker):
    agent_id = await calling_agent(client, tenant)
    person = await make_contact(client, tenant, phone=callee("2671"))
    silent = await create_contact(client, tenant, phone=callee(NO_ANSWER))
    busy = await create_contact(client, tenant, phone=callee(BUSY))
    no_phone = await create_contact(client, tenant, email="nophone@example.com")
    revoked = await create_contact(client, tenant, phone=callee(NO_ANSWER))
    response = await client.put(
        f"/webhooks/inbound/contacts/{revoked}/consent",
        json={"channel": "call", "status": "revoked"},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    campaign = await create_call_campaign(
        client,
        tenant,
        agent_id,
        [person, silent, busy, no_phone, revoked],
        variables={"offer": "spring"},
    )
    assert campaign["pending"] == 3  # the contacts the campaign can call now

    await start(client, tenant, campaign["id"])
    done = await wait_for(client, tenant, campaign["id"], "completed")

    assert (done["contacted"], done["success"], done["pending"]) == (3, 1, 0)
    by_contact = {r["contact_id"]: r for r in await recipients_of(client, tenant, campaign["id"])}
    assert {k: (r["status"], r["outcome"]) for k, r in by_contact.items()} == {
        person: ("done", "customer_hangup"),
        silent: ("failed", "no_answer"),
        busy: ("failed", "busy"),
        no_phone: ("skipped", None),
        revoked: ("skipped", None),
    }
    assert by_contact[no_phone]["error"] == "contact_has_no_phone"
    assert by_contact[revoked]["error"] == "contact_opted_out"
    assert by_contact[silent]["error"] and by_contact[person]["error"] is None
    calls = await campaign_calls(pool, tenant, campaign["id"])
    assert sorted(str(call["id"]) for call in calls) == sorted(
        call_id for r in by_contact.values() for call_id in r["call_ids"]
    )
    assert all(call["variables"] == {"offer": "spring"} for call in calls)
    assert [r["attempts"] for r in by_contact.values()].count(1) == 3
    completed = [e for e in await stored_events(pool, tenant) if e["type"] == "campaign.completed"]
    assert len(completed) == 1
    assert completed[0]["data"]["campaign"]["id"] == campaign["id"]


async def test_calls_in_progress_never_exceed_max_concurrent_calls(client, pool, tenant, worker):
    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 12)
    campaign = await create_call_campaign(
        client, tenant, agent_id, contacts, max_concurrent_calls=3
    )
    await start(client, tenant, campaign["id"])

    samples = await sampled_until_completed(client, pool, tenant, campaign["id"])

    assert max(samples) == 3, samples  # the limit is reached, never passed
    assert await calls_per_contact(pool, tenant, campaign["id"]) == {c: 1 for c in contacts}


async def test_plans_limit_caps_the_campaign_without_queueing_calls(client, pool, agency, worker):
    plan = await create_plan(client, agency.headers, name="Two lines", max_concurrent_calls=2)
    tenant = await make_tenant(client, agency, plan=plan["slug"])
    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 6)
    campaign = await create_call_campaign(
        client, tenant, agent_id, contacts, max_concurrent_calls=10
    )
    await start(client, tenant, campaign["id"])

    samples = await sampled_until_completed(client, pool, tenant, campaign["id"])
    assert max(samples) == 2, samples


async def test_plans_limit_holds_with_single_and_scheduled_calls_beside_the_campaign(
    client, pool, agency, worker
):
    # A call scheduled before the campaign starts comes due during it (older than the
    # campaign's calls), and a single call is placed in the middle: the sub-account never has
    # more than its plan's 2 calls on the line, and every call is placed in the end.
    plan = await create_plan(client, agency.headers, name="Two lines", max_concurrent_calls=2)
    tenant = await make_tenant(client, agency, plan=plan["slug"])
    agent_id = await calling_agent(client, tenant)
    single, scheduled, *contacts = await callees(client, tenant, 8)
    placed = await client.post(
        f"/webhooks/inbound/contacts/{scheduled}/call",
        json={"agent_id": agent_id, "start_at": soon(2).isoformat()},
        headers=tenant.headers,
    )
    assert placed.status_code == 200, await placed.get_data(as_text=True)
    campaign = await create_call_campaign(
        client, tenant, agent_id, contacts, max_concurrent_calls=10
    )
    await start(client, tenant, campaign["id"])

    on_the_line: list[int] = []

    async def sample() -> None:
        while True:
            rows = await tenant_sql(
                pool,
                tenant,
                "SELECT count(*) AS n FROM calls WHERE status IN ('ringing', 'in_progress')",
            )
            on_the_line.append(int(rows[0]["n"]))
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    try:
        await asyncio.sleep(1)
        response = await client.post(
            f"/webhooks/inbound/contacts/{single}/call",
            json={"agent_id": agent_id},
            headers=tenant.headers,
        )
        assert response.status_code == 200, await response.get_data(as_text=True)
        await wait_for(client, tenant, campaign["id"], "completed")
        async with asyncio.timeout(60):
            while True:
                rows = await tenant_sql(
                    pool,
                    tenant,
                    "SELECT count(*) AS n FROM calls"
                    " WHERE status IN ('scheduled', 'queued', 'ringing', 'in_progress')",
                )
                if rows[0]["n"] == 0:
                    break
                await asyncio.sleep(0.1)
    finally:
        sampler.cancel()
    assert max(on_the_line) == 2, on_the_line
    ended = await tenant_sql(pool, tenant, "SELECT status, started_at FROM calls")
    assert len(ended) == 8 and all(row["started_at"] is not None for row in ended)


async def test_no_answer_and_busy_are_retried_after_the_delay(
    client, pool, tenant, worker, worker_env
):
    worker_env(SWITCHBOARD_CAMPAIGN_RETRY_SCALE="0.02")  # a minute of delay is 1.2 s
    agent_id = await calling_agent(client, tenant)
    silent = await create_contact(client, tenant, phone=callee(NO_ANSWER))
    busy = await create_contact(client, tenant, phone=callee(BUSY))
    campaign = await create_call_campaign(
        client,
        tenant,
        agent_id,
        [silent, busy],
        retry={"max_attempts": 3, "delay_minutes": 1, "on": ["no_answer", "busy"]},
    )
    await start(client, tenant, campaign["id"])
    done = await wait_for(client, tenant, campaign["id"], "completed")

    assert (done["contacted"], done["success"]) == (2, 0)
    recipients = {r["contact_id"]: r for r in await recipients_of(client, tenant, campaign["id"])}
    assert {k: (r["status"], r["outcome"], r["attempts"]) for k, r in recipients.items()} == {
        silent: ("failed", "no_answer", 3),
        busy: ("failed", "busy", 3),
    }
    calls = {str(call["id"]): call for call in await campaign_calls(pool, tenant, campaign["id"])}
    for recipient in recipients.values():
        attempts = [calls[call_id] for call_id in recipient["call_ids"]]
        assert len(attempts) == 3 and len({call["id"] for call in attempts}) == 3
        for before, after in zip(attempts, attempts[1:], strict=False):
            # The delay runs from the end of the previous attempt.
            assert after["created_at"] - before["ended_at"] >= timedelta(seconds=1.2)


async def test_an_outcome_the_policy_does_not_name_is_not_retried(
    client, pool, tenant, worker, worker_env
):
    worker_env(SWITCHBOARD_CAMPAIGN_RETRY_SCALE="0.02")
    agent_id = await calling_agent(client, tenant)
    busy = await create_contact(client, tenant, phone=callee(BUSY))
    campaign = await create_call_campaign(
        client,
        tenant,
        agent_id,
        [busy],
        retry={"max_attempts": 3, "delay_minutes": 1, "on": ["no_answer"]},
    )
    await start(client, tenant, campaign["id"])
    await wait_for(client, tenant, campaign["id"], "completed")
    (recipient,) = await recipients_of(client, tenant, campaign["id"])
    assert (recipient["status"], recipient["attempts"], recipient["outcome"]) == (
        "failed",
        1,
        "busy",
    )


def closed_window(zone: str) -> dict[str, object]:
    """A window of `zone` that is closed now: only on the day after tomorrow, local time."""
    local = datetime.now(ZoneInfo(zone))
    return {
        "timezone": zone,
        "days": [DAYS[(local.weekday() + 2) % 7]],
        "start": "09:00",
        "end": "17:00",
    }


async def test_a_campaign_due_outside_its_window_waits_for_the_opening(
    client, pool, tenant, worker
):
    agent_id = await calling_agent(client, tenant)
    window = closed_window("Pacific/Auckland")
    campaign = await create_call_campaign(
        client, tenant, agent_id, await callees(client, tenant, 2), calling_window=window
    )
    await start(client, tenant, campaign["id"])
    await asyncio.sleep(3)

    waiting = await get_campaign(client, tenant, campaign["id"])
    assert waiting["status"] == "scheduled"
    local = datetime.now(ZoneInfo("Pacific/Auckland"))
    opening = datetime.combine(
        local.date() + timedelta(days=2),
        datetime.min.time().replace(hour=9),
        ZoneInfo("Pacific/Auckland"),
    )
    assert datetime.fromisoformat(waiting["start_date"]) == opening
    assert await campaign_calls(pool, tenant, campaign["id"]) == []


async def test_calls_start_when_the_window_in_another_timezone_opens(client, pool, tenant, worker):
    zone = ZoneInfo("America/Los_Angeles")
    local = datetime.now(zone).replace(second=0, microsecond=0)
    if local.hour == 23 and local.minute >= 58:
        local += timedelta(minutes=3)  # not across midnight
    opening = local + timedelta(minutes=1)
    window = {
        "timezone": "America/Los_Angeles",
        "days": [DAYS[opening.weekday()]],
        "start": opening.strftime("%H:%M"),
        "end": (opening + timedelta(minutes=1)).strftime("%H:%M"),
    }
    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 2)
    campaign = await create_call_campaign(client, tenant, agent_id, contacts, calling_window=window)
    await start(client, tenant, campaign["id"])

    await wait_for(client, tenant, campaign["id"], "completed", seconds=200)
    calls = await campaign_calls(pool, tenant, campaign["id"])
    assert len(calls) == 2
    assert min(call["created_at"] for call in calls) >= opening.astimezone(UTC)


async def test_cancel_mid_campaign_places_no_new_call_and_settles_the_rest(
    client, pool, tenant, worker, worker_env
):
    worker_env(SWITCHBOARD_SANDBOX_RING_SECONDS="3")
    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 6)
    campaign = await create_call_campaign(
        client, tenant, agent_id, contacts, max_concurrent_calls=2
    )
    await start(client, tenant, campaign["id"])
    await until_on_the_line(pool, tenant, campaign["id"], 2)

    response = await client.post(f"{CAMPAIGNS}/{campaign['id']}/cancel", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await response.get_json())["campaign"]["status"] == "cancelled"
    placed = len(await campaign_calls(pool, tenant, campaign["id"]))
    async with asyncio.timeout(60):
        while True:
            statuses = [r["status"] for r in await recipients_of(client, tenant, campaign["id"])]
            if "in_progress" not in statuses:
                break
            await asyncio.sleep(0.1)

    assert len(await campaign_calls(pool, tenant, campaign["id"])) == placed == 2
    assert sorted(statuses) == ["failed"] * 2 + ["skipped"] * 4
    skipped = [
        r for r in await recipients_of(client, tenant, campaign["id"]) if r["status"] == "skipped"
    ]
    assert {r["error"] for r in skipped} == {"campaign_cancelled"}
    assert (await get_campaign(client, tenant, campaign["id"]))["status"] == "cancelled"
    assert "campaign.completed" not in [e["type"] for e in await stored_events(pool, tenant)]


async def test_low_funds_pause_the_campaign_until_resumed(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, call_per_minute=0.25)
    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 3)
    campaign = await create_call_campaign(client, tenant, agent_id, contacts)
    await start(client, tenant, campaign["id"])

    paused = await wait_for(client, tenant, campaign["id"], "paused")
    assert paused["paused_reason"].startswith("insufficient_funds")
    assert await campaign_calls(pool, tenant, campaign["id"]) == []
    assert {r["status"] for r in await recipients_of(client, tenant, campaign["id"])} == {"pending"}

    await credit(client, tenant, 5)
    response = await client.post(
        f"{CAMPAIGNS}/{campaign['id']}/resume", json={}, headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    done = await wait_for(client, tenant, campaign["id"], "completed")
    assert done["contacted"] == 3 and done["paused_reason"] is None
    assert await calls_per_contact(pool, tenant, campaign["id"]) == {c: 1 for c in contacts}


async def test_a_lost_redis_mid_campaign_still_completes_once_per_recipient(
    app, client, pool, tenant, worker, worker_env
):
    worker_env(SWITCHBOARD_SANDBOX_RING_SECONDS="2")
    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 8)
    campaign = await create_call_campaign(
        client, tenant, agent_id, contacts, max_concurrent_calls=3
    )
    await start(client, tenant, campaign["id"])
    await until_on_the_line(pool, tenant, campaign["id"], 3)

    # Redis loses everything of this test's: its database (FLUSHALL would also empty the other
    # test workers' databases on the same server, losing their jobs).
    await app.app.config["ARQ"].flushdb()

    await wait_for(client, tenant, campaign["id"], "completed")
    assert await calls_per_contact(pool, tenant, campaign["id"]) == {c: 1 for c in contacts}


async def test_a_campaign_of_another_type_is_untouched_by_the_dispatcher(client, pool, tenant):
    from api.campaigns.dialer import dial_campaign
    from tests.factories import create_campaign
    from tests.helpers import scope_of

    campaign = await create_campaign(client, tenant)
    assert await dial_campaign(scope_of(pool, tenant), uuid.UUID(campaign["id"])) is None
    assert await dial_campaign(scope_of(pool, tenant), uuid.uuid4()) is None


async def test_a_campaigns_queued_call_holds_its_place_against_an_older_queued_call(
    client, pool, agency, worker
):
    # A call scheduled long ago comes due (queued, older) while a campaign's call, whose place
    # its dispatcher took, is queued and about to be placed without asking again: with one
    # line, the older call must wait for it.
    from api.calls.service import place_free
    from tenancy.db import tenant_transaction

    plan = await create_plan(client, agency.headers, name="One line", max_concurrent_calls=1)
    tenant = await make_tenant(client, agency, plan=plan["slug"])
    agent_id = await calling_agent(client, tenant)
    first, second = await callees(client, tenant, 2)
    campaign = await create_call_campaign(client, tenant, agent_id, [first])
    insert = (
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, provider, status,"
        " campaign_id, created_at) VALUES ($1, $2, '+14155550123', '+14155552671', 'sandbox',"
        " 'queued', $3, now() - make_interval(mins => $4)) RETURNING id, created_at"
    )
    await tenant_sql(
        pool, tenant, insert, uuid.UUID(first), uuid.UUID(agent_id), uuid.UUID(campaign["id"]), 0
    )
    [older] = await tenant_sql(
        pool, tenant, insert, uuid.UUID(second), uuid.UUID(agent_id), None, 60
    )
    async with tenant_transaction(pool, tenant.schema) as conn:
        assert not await place_free(conn, tenant.id, older)
    await tenant_sql(
        pool,
        tenant,
        "UPDATE calls SET status = 'failed' WHERE campaign_id = $1",
        uuid.UUID(campaign["id"]),
    )
    async with tenant_transaction(pool, tenant.schema) as conn:
        assert await place_free(conn, tenant.id, older)


async def test_calls_a_dispatcher_wrote_and_died_before_placing_are_placed_once_by_their_work(
    client, pool, tenant, worker, monkeypatch
):
    from api.calls.service import place_written_call
    from api.campaigns import dialer
    from integrations.telephony import Providers
    from tests.helpers import scope_of

    # Given: every dispatcher run dies right after committing the calls it wrote, before it
    # places any of them (what a SIGKILL between the two leaves).
    left: list[uuid.UUID] = []

    async def died_before_placing(scope, providers, call_ids):
        left.extend(call_ids)

    monkeypatch.setattr(dialer, "_place_written", died_before_placing)
    monkeypatch.setattr(dialer, "PLACING_GRACE", timedelta(seconds=2))
    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 3)
    campaign = await create_call_campaign(client, tenant, agent_id, contacts)

    # When: the campaign runs.
    await start(client, tenant, campaign["id"])
    done = await wait_for(client, tenant, campaign["id"], "completed")

    # Then: each call was placed by its own `call` work once the grace had passed, exactly once.
    calls = await campaign_calls(pool, tenant, campaign["id"])
    assert sorted(left) == sorted(call["id"] for call in calls)
    assert await calls_per_contact(pool, tenant, campaign["id"]) == {c: 1 for c in contacts}
    for call in calls:
        assert call["started_at"] - call["created_at"] >= timedelta(seconds=2)
    assert done["contacted"] == 3
    recipients = await recipients_of(client, tenant, campaign["id"])
    assert {(r["status"], r["attempts"], r["outcome"]) for r in recipients} == {
        ("failed", 1, "no_answer")
    }
    # A dispatcher that comes back to a call placed meanwhile leaves it as it is.
    providers = Providers("sandbox")
    try:
        for call in calls:
            await place_written_call(scope_of(pool, tenant), providers, call["id"])
    finally:
        await providers.aclose()
    assert await campaign_calls(pool, tenant, campaign["id"]) == calls


async def test_a_dispatcher_places_the_calls_it_writes_without_waiting_for_their_work(
    client, pool, tenant, worker
):
    from api.campaigns.dialer import PLACING_GRACE

    agent_id = await calling_agent(client, tenant)
    contacts = await callees(client, tenant, 3)
    campaign = await create_call_campaign(client, tenant, agent_id, contacts)
    await start(client, tenant, campaign["id"])
    await wait_for(client, tenant, campaign["id"], "completed")
    calls = await campaign_calls(pool, tenant, campaign["id"])
    assert len(calls) == 3
    for call in calls:
        assert call["started_at"] - call["created_at"] < PLACING_GRACE
