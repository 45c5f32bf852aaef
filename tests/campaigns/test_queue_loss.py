"""A scheduled campaign survives Redis losing everything (FLUSHALL) before it is due.

PostgreSQL keeps the intent (control.due_work); the running worker's sweeper, every 5 s,
queues the due row again. Bound: the emails arrive within SWEEP_BOUND_SECONDS of start_date
(one sweep interval, plus the send, plus slack for a loaded test machine).
"""

from __future__ import annotations

import asyncio
import time
import uuid

from jobs import due
from tests.factories import add_contact, create_campaign
from tests.helpers import contact_email, get_campaign, schedule, soon, wait_for_status

SWEEP_BOUND_SECONDS = 20


async def test_campaign_is_sent_after_redis_is_flushed_before_it_is_due(
    app, client, pool, tenant, mailbox, worker
):
    arq = app.app.config["ARQ"]
    contacts = [await add_contact(client, tenant) for _ in range(3)]
    campaign = await create_campaign(client, tenant, contact_ids=contacts)
    start = soon(4)
    response = await schedule(client, tenant, campaign["id"], start)
    assert response.status_code == 200, await response.get_data(as_text=True)

    # The worker heard the commit and queued the run for start_date...
    row = await pool.fetchrow(
        "SELECT id, version FROM control.due_work WHERE ref_id = $1", uuid.UUID(campaign["id"])
    )
    job_key = f"arq:job:{due.job_id(row['id'], row['version'])}"
    async with asyncio.timeout(10):
        while True:
            if await arq.exists(job_key):
                break
            await asyncio.sleep(0.05)
    # ...and Redis loses everything before it is due.
    await arq.flushdb()
    assert await arq.zcard("arq:queue") == 0
    assert (await get_campaign(client, tenant, campaign["id"]))["status"] == "scheduled"

    addresses = [await contact_email(pool, tenant, contact) for contact in contacts]
    deadline = start.timestamp() + SWEEP_BOUND_SECONDS
    while not all(mailbox.to(address) for address in addresses):
        assert time.time() < deadline, "not sent within the bound after FLUSHALL"
        await asyncio.sleep(0.1)

    assert [len(mailbox.to(address)) for address in addresses] == [1, 1, 1]
    done = await wait_for_status(client, tenant, campaign["id"], "completed")
    assert (done["contacted"], done["success"]) == (3, 3)
