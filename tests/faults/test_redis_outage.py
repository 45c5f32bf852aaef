"""Redis stopped and started during traffic: the API keeps serving what needs only PostgreSQL,
the rate limiter fails open (or closed, by SWITCHBOARD_RATE_LIMIT_FAIL_OPEN), and effects queued
while Redis was down are delivered once it is back (the due-work sweeper re-enqueues them)."""

from __future__ import annotations

import uuid

from api.ratelimit import MAX_LEASE
from tests.receiver import Receiver

from .conftest import BASE, assert_unavailable, eventually, make_sub_account


async def test_contacts_tags_and_notes_work_while_redis_is_down_and_webhooks_catch_up(stack):
    api = stack.serve()
    stack.worker()
    receiver = await Receiver().start()
    account = await make_sub_account(api, stack.create_organisation())
    try:
        async with api.client(account.key) as http:
            subscribed = await http.post(
                f"{BASE}/webhook-subscriptions",
                json={"url": receiver.url("/hook"), "events": ["contact.updated"]},
            )
            assert subscribed.status_code == 201, subscribed.text

            stack.stop_redis()
            try:
                created = await http.post(
                    f"{BASE}/contacts", json={"email": f"r-{uuid.uuid4().hex[:8]}@example.com"}
                )
                assert created.status_code == 201, created.text
                contact_id = created.json()["contact_id"]
                updated = await http.patch(
                    f"{BASE}/contacts/{contact_id}", json={"first_name": "Outage"}
                )
                assert updated.status_code == 200, updated.text
                tagged = await http.post(
                    f"{BASE}/contacts/{contact_id}/tags", json={"tags": ["during-outage"]}
                )
                assert tagged.status_code == 200, tagged.text
                noted = await http.post(
                    f"{BASE}/contacts/{contact_id}/notes",
                    json={"content": "written while Redis was down"},
                )
                assert noted.status_code == 201, noted.text
                read = await http.get(f"{BASE}/contacts/{contact_id}")
                assert read.status_code == 200, read.text
                notes = await http.get(f"{BASE}/contacts/{contact_id}/notes")
                assert notes.status_code == 200, notes.text
            finally:
                stack.start_redis()

            contact = read.json()["contact"]
            assert contact["first_name"] == "Outage"
            assert contact["tags"] == ["during-outage"]
            assert [note["content"] for note in notes.json()["notes"]] == [
                "written while Redis was down"
            ]

        def delivered() -> list[dict]:
            return [
                body
                for body in (request.json() for request in receiver.to("/hook"))
                if body["data"]["contact"]["id"] == contact_id
            ]

        async def caught_up() -> list[dict]:
            return [body for body in delivered() if body["data"]["contact"]["tags"]]

        events = await eventually(caught_up, seconds=120)
        assert all(body["type"] == "contact.updated" for body in delivered())
        assert events[-1]["data"]["contact"]["first_name"] == "Outage"
    finally:
        await receiver.stop()


async def test_rate_limit_fails_closed_when_configured_with_503_in_the_envelope(stack):
    api = stack.serve(SWITCHBOARD_RATE_LIMIT_FAIL_OPEN="false")
    account = await make_sub_account(api, stack.create_organisation())
    async with api.client(account.key) as http:
        assert (await http.get(f"{BASE}/contacts")).status_code == 200
        stack.stop_redis()
        try:
            # Grants the process already took from Redis (at most a tenth of the limit, counted
            # there) are still spent; then nothing goes through uncounted.
            answers = [await http.get(f"{BASE}/contacts") for _ in range(MAX_LEASE + 1)]
            assert [r.status_code for r in answers].count(200) <= MAX_LEASE
            assert_unavailable(answers[-1])
            refused = await http.post(f"{BASE}/contacts", json={"email": "closed@example.com"})
            assert_unavailable(refused)
        finally:
            stack.start_redis()

        async def recovered() -> bool:
            return (await http.get(f"{BASE}/contacts")).status_code == 200

        await eventually(recovered, seconds=60)
        listed = (await http.get(f"{BASE}/contacts")).json()
        assert "closed@example.com" not in [contact["email"] for contact in listed["contacts"]]
