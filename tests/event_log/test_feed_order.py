"""GET /webhooks/inbound/events in commit order (issue 23, CONTRACT 11, 11a): a poller that asks
for what came after the newest event it has seen (`since=<largest timestamp>` or `after=<its
id>`) misses none, however many transactions emit at once; `since` with `after`, or an `after`
that is not an event of the sub-account, is 400."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

from tests.factories import create_contact, subscribe, unique_email
from tests.helpers import expect_error, tenant_sql

EVENTS = "/webhooks/inbound/events"
CONTACTS = "/webhooks/inbound/contacts"
CONTACTS_MADE = 300
CLIENTS = 30


def when(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))


async def walk(client: Any, tenant: Any, cursor: str) -> list[dict[str, Any]]:
    """One poll as a client makes it: every page after the cursor (`since=...` or `after=...`,
    or none), until has_more is false; an event a later page repeats is kept once."""
    seen: dict[str, dict[str, Any]] = {}
    offset = 0
    while True:
        query = f"?type=contact.created&limit=100&offset={offset}{cursor}"
        response = await client.get(f"{EVENTS}{query}", headers=tenant.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)
        page = await response.get_json()
        for event in page["events"]:
            seen.setdefault(event["id"], event)
        if not page["has_more"]:
            return list(seen.values())
        offset += page["limit"]


async def poll(client: Any, tenant: Any, by: str, done: asyncio.Event) -> list[list[str]]:
    """Polls until the contacts are all made, then once more; each poll's contact ids."""
    cursor = ""
    polls = []
    while True:
        last = done.is_set()
        events = await walk(client, tenant, cursor)
        polls.append([event["data"]["contact"]["id"] for event in events])
        if events:
            newest = max(events, key=when)
            cursor = (
                f"&since={quote(newest['timestamp'])}"
                if by == "since"
                else f"&after={newest['id']}"
            )
        if last:
            return polls
        await asyncio.sleep(0.005)


async def make_contacts(client: Any, tenant: Any) -> list[str]:
    """CONTACTS_MADE contacts made through the API by CLIENTS clients at once."""
    queue = list(range(CONTACTS_MADE))
    made: list[str] = []

    async def one_client() -> None:
        while queue:
            queue.pop()
            made.append(await create_contact(client, tenant, email=unique_email("feed")))

    await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    return made


async def test_pollers_by_since_and_after_see_every_event_once(client, tenant):
    done = asyncio.Event()

    async def creators() -> list[str]:
        try:
            return await make_contacts(client, tenant)
        finally:
            done.set()

    made, by_since, by_after = await asyncio.gather(
        creators(), poll(client, tenant, "since", done), poll(client, tenant, "after", done)
    )

    assert len(made) == CONTACTS_MADE
    for polls in (by_since, by_after):
        seen = [contact_id for one_poll in polls for contact_id in one_poll]
        # Every contact.created once: none missed, none listed again by a later poll.
        assert sorted(seen) == sorted(made), (len(seen), len(set(seen)), len(made))
    # The pollers really polled while the contacts were made.
    assert len(by_since) > 2 and len(by_after) > 2


async def test_feed_order_is_commit_order_with_growing_timestamps(client, pool, tenant):
    await asyncio.gather(*(create_contact(client, tenant) for _ in range(40)))
    response = await client.get(f"{EVENTS}?limit=100", headers=tenant.headers)
    events = (await response.get_json())["events"]
    assert len(events) == 40
    stamps = [when(event) for event in events]
    # Newest first, no two events at the same millisecond.
    assert stamps == sorted(stamps, reverse=True) and len(set(stamps)) == 40
    rows = await tenant_sql(pool, tenant, "SELECT id FROM events ORDER BY position DESC")
    assert [row["id"] for row in rows] == [event["id"] for event in events]


async def test_after_lists_what_came_later(client, tenant):
    for _ in range(3):
        await create_contact(client, tenant)
    [newest, middle, oldest] = (
        await (await client.get(EVENTS, headers=tenant.headers)).get_json()
    )["events"]
    body = await (
        await client.get(f"{EVENTS}?after={oldest['id']}", headers=tenant.headers)
    ).get_json()
    assert [event["id"] for event in body["events"]] == [newest["id"], middle["id"]]
    assert (body["total"], body["has_more"]) == (2, False)
    page = await (
        await client.get(f"{EVENTS}?after={oldest['id']}&limit=1&offset=1", headers=tenant.headers)
    ).get_json()
    assert [event["id"] for event in page["events"]] == [middle["id"]]
    latest = await (
        await client.get(f"{EVENTS}?after={newest['id']}", headers=tenant.headers)
    ).get_json()
    assert (latest["events"], latest["total"]) == ([], 0)
    typed = await (
        await client.get(
            f"{EVENTS}?after={oldest['id']}&type=contact.deleted", headers=tenant.headers
        )
    ).get_json()
    assert typed["events"] == []


async def test_event_timestamp_is_the_payloads(client, pool, tenant):
    await subscribe(client, tenant, "https://example.com/hook", ["contact.created"])
    await create_contact(client, tenant)
    [event] = (await (await client.get(EVENTS, headers=tenant.headers)).get_json())["events"]
    [row] = await tenant_sql(pool, tenant, "SELECT body FROM webhook_deliveries")
    assert row["body"].startswith(
        f'{{"type":"contact.created","timestamp":"{event["timestamp"]}","data":{{'
    )


async def test_since_and_after_together_is_400(client, tenant):
    await create_contact(client, tenant)
    [event] = (await (await client.get(EVENTS, headers=tenant.headers)).get_json())["events"]
    response = await client.get(
        f"{EVENTS}?since={quote(event['timestamp'])}&after={event['id']}", headers=tenant.headers
    )
    body = await expect_error(response, 400, "validation_error")
    assert body["error"]["details"][0]["field"] == "after"


async def test_after_of_another_sub_account_or_no_event_is_400(client, tenant, tenant_second):
    await create_contact(client, tenant_second)
    [theirs] = (await (await client.get(EVENTS, headers=tenant_second.headers)).get_json())[
        "events"
    ]
    for after in (theirs["id"], f"msg_{uuid.uuid4().hex}", "msg_1", "x", "", "%00"):
        response = await client.get(f"{EVENTS}?after={after}", headers=tenant.headers)
        body = await expect_error(response, 400, "validation_error")
        assert body["error"]["details"][0]["field"].startswith("after"), after
