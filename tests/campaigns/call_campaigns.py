"""Factories and probes of the call campaign tests: an agent with a caller id, callees by script,
a call campaign, its recipients and calls as the API shows them, and what the database holds."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from typing import Any

from tests.factories import assign, create_contact, import_number, make_agent, unique_phone
from tests.helpers import get_campaign, tenant_sql

CAMPAIGNS = "/webhooks/inbound/campaigns"
# The sandbox's callees (CONTRACT 6): these never answer, are busy, or talk (any other ending).
NO_ANSWER = "0186"
BUSY = "0187"
_exchanges = itertools.count(200)


def callee(ending: str = NO_ANSWER) -> str:
    """A San Francisco number ending `ending`, different at every call."""
    return f"+1415{next(_exchanges) % 800 + 200:03d}{ending}"


async def calling_agent(client: Any, tenant: Any, **overrides: Any) -> str:
    """An agent with a number of its own (its caller id)."""
    agent_id = await make_agent(client, tenant, **overrides)
    number_id = await import_number(client, tenant, unique_phone())
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    return agent_id


async def callees(client: Any, tenant: Any, count: int, ending: str = NO_ANSWER) -> list[str]:
    return [
        await create_contact(client, tenant, phone=callee(ending), name=f"Lead {n}")
        for n in range(count)
    ]


def call_body(agent_id: str, contact_ids: list[str], **fields: Any) -> dict[str, Any]:
    return {
        "name": "Leads",
        "campaign_type": "call",
        "agent_id": agent_id,
        "contact_ids": contact_ids,
        **fields,
    }


async def create_call_campaign(
    client: Any, tenant: Any, agent_id: str, contact_ids: list[str], **fields: Any
) -> dict[str, Any]:
    response = await client.post(
        CAMPAIGNS, json=call_body(agent_id, contact_ids, **fields), headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["campaign"]  # type: ignore[no-any-return]


async def recipients_of(client: Any, tenant: Any, campaign_id: str) -> list[dict[str, Any]]:
    """Every recipient as GET /campaigns/{id}/recipients lists them, page after page."""
    found: list[dict[str, Any]] = []
    while True:
        response = await client.get(
            f"{CAMPAIGNS}/{campaign_id}/recipients?limit=100&offset={len(found)}",
            headers=tenant.headers,
        )
        assert response.status_code == 200, await response.get_data(as_text=True)
        page = (await response.get_json())["recipients"]
        found += page
        if len(page) < 100:
            return found


async def campaign_calls(pool: Any, tenant: Any, campaign_id: str) -> list[dict[str, Any]]:
    """The calls the campaign placed, oldest first."""
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT id, contact_id, status, ended_reason, created_at, started_at, ended_at, "
        "variables FROM calls WHERE campaign_id = $1 ORDER BY created_at, id",
        uuid.UUID(campaign_id),
    )
    return [dict(row) for row in rows]


async def calls_per_contact(pool: Any, tenant: Any, campaign_id: str) -> Counter[str]:
    return Counter(
        str(call["contact_id"]) for call in await campaign_calls(pool, tenant, campaign_id)
    )


async def open_calls(pool: Any, tenant: Any, campaign_id: str) -> int:
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT count(*) AS n FROM calls WHERE campaign_id = $1 "
        "AND status IN ('queued', 'ringing', 'in_progress')",
        uuid.UUID(campaign_id),
    )
    return int(rows[0]["n"])


async def wait_for(
    client: Any, tenant: Any, campaign_id: str, *statuses: str, seconds: float = 120
) -> dict[str, Any]:
    """Poll until the campaign reaches one of `statuses` (a generous bound, not a timing)."""
    async with asyncio.timeout(seconds):
        while True:
            campaign = await get_campaign(client, tenant, campaign_id)
            if campaign["status"] in statuses:
                return campaign
            await asyncio.sleep(0.1)


async def until_on_the_line(pool: Any, tenant: Any, campaign_id: str, count: int) -> None:
    """Wait until `count` calls of the campaign are queued, ringing or in progress."""
    async with asyncio.timeout(30):
        while True:
            if await open_calls(pool, tenant, campaign_id) >= count:
                return
            await asyncio.sleep(0.05)


async def sampled_until_completed(
    client: Any, pool: Any, tenant: Any, campaign_id: str
) -> list[int]:
    """The campaign's calls on the line, sampled every 20 ms until it completes."""
    samples: list[int] = []
    async with asyncio.timeout(120):
        while (await get_campaign(client, tenant, campaign_id))["status"] != "completed":
            samples.append(await open_calls(pool, tenant, campaign_id))
            await asyncio.sleep(0.02)
    return samples
