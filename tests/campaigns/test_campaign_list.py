"""GET /campaigns: newest first, filter `status`, each item as GET /campaigns/{id} shows it."""

from __future__ import annotations

import uuid

from tests.factories import CAMPAIGNS, create_campaign, make_contact
from tests.helpers import get_campaign, tenant_sql


async def listed(client, tenant, query=""):
    response = await client.get(f"{CAMPAIGNS}{query}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def set_status(pool, tenant, campaign_id, status):
    await tenant_sql(
        pool,
        tenant,
        "UPDATE campaigns SET status = $2 WHERE id = $1",
        uuid.UUID(campaign_id),
        status,
    )


async def test_items_are_shaped_as_the_single_read_counters_included(client, tenant):
    contact_id = await make_contact(client, tenant)
    made = await create_campaign(client, tenant, contact_ids=[contact_id])
    body = await listed(client, tenant)
    assert body["campaigns"] == [await get_campaign(client, tenant, made["id"])]
    assert body["campaigns"][0]["pending"] == 1


async def test_status_filter_lists_only_that_status_and_counts_it(client, pool, tenant):
    draft = await create_campaign(client, tenant, name="draft")
    cancelled = await create_campaign(client, tenant, name="cancelled")
    paused = await create_campaign(client, tenant, name="paused")
    await set_status(pool, tenant, cancelled["id"], "cancelled")
    await set_status(pool, tenant, paused["id"], "paused")

    only_paused = await listed(client, tenant, "?status=paused")
    only_draft = await listed(client, tenant, "?status=draft&limit=1")
    none_sending = await listed(client, tenant, "?status=sending")

    assert [c["id"] for c in only_paused["campaigns"]] == [paused["id"]]
    assert only_paused["total"] == 1 and only_paused["campaigns"][0]["status"] == "paused"
    assert [c["id"] for c in only_draft["campaigns"]] == [draft["id"]]
    assert (only_draft["total"], only_draft["has_more"]) == (1, False)
    assert (none_sending["campaigns"], none_sending["total"]) == ([], 0)
    assert (await listed(client, tenant))["total"] == 3


async def test_another_sub_accounts_campaigns_are_not_listed(client, tenant, tenant_second):
    await create_campaign(client, tenant_second)
    mine = await create_campaign(client, tenant)
    body = await listed(client, tenant)
    assert [c["id"] for c in body["campaigns"]] == [mine["id"]] and body["total"] == 1
