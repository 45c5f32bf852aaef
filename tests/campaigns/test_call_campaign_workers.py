"""Two `switchboard worker` processes dispatch one call campaign at once, and one of them is
killed mid-campaign: no recipient is called twice, none is missed, the limit holds throughout."""

from __future__ import annotations

import asyncio
import signal
import subprocess

from tests.campaigns.call_campaigns import (
    callees,
    calling_agent,
    calls_per_contact,
    campaign_calls,
    create_call_campaign,
    open_calls,
    recipients_of,
)
from tests.helpers import get_campaign, schedule, soon, worker_process

RECIPIENTS = 16
AT_ONCE = 4


def start_worker() -> subprocess.Popen[bytes]:
    return worker_process(SWITCHBOARD_SANDBOX_RING_SECONDS="2")


async def test_two_workers_one_killed_mid_campaign_call_each_recipient_once(client, pool, tenant):
    first, second = start_worker(), start_worker()
    samples: list[int] = []
    try:
        await asyncio.sleep(3)  # both listening (they also run the number's import)
        agent_id = await calling_agent(client, tenant)
        contacts = await callees(client, tenant, RECIPIENTS)
        campaign = await create_call_campaign(
            client, tenant, agent_id, contacts, max_concurrent_calls=AT_ONCE
        )
        assert (await schedule(client, tenant, campaign["id"], soon(1))).status_code == 200
        async with asyncio.timeout(60):
            while len(await campaign_calls(pool, tenant, campaign["id"])) < RECIPIENTS // 2:
                samples.append(await open_calls(pool, tenant, campaign["id"]))
                await asyncio.sleep(0.02)
        first.send_signal(signal.SIGKILL)  # mid-campaign, calls on the line
        first.wait(timeout=10)
        try:
            async with asyncio.timeout(240):
                while (await get_campaign(client, tenant, campaign["id"]))["status"] != "completed":
                    samples.append(await open_calls(pool, tenant, campaign["id"]))
                    await asyncio.sleep(0.05)
        except TimeoutError:
            # What was left, so that a run that does not finish says where it stopped.
            left = await pool.fetch(
                "SELECT kind, due_at, attempts, failures, claimed_until, last_error, status"
                " FROM control.due_work WHERE sub_account_id = $1",
                tenant.id,
            )
            raise AssertionError(
                f"not completed: {await get_campaign(client, tenant, campaign['id'])}; "
                f"recipients {await recipients_of(client, tenant, campaign['id'])}; "
                f"due work {[dict(row) for row in left]}"
            ) from None
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)

    assert max(samples) <= AT_ONCE, samples
    assert await calls_per_contact(pool, tenant, campaign["id"]) == {c: 1 for c in contacts}
    recipients = await recipients_of(client, tenant, campaign["id"])
    assert {(r["status"], r["attempts"], r["outcome"]) for r in recipients} == {
        ("failed", 1, "no_answer")
    }
