"""PostgreSQL restarted under a running API: requests during the outage get 503 in the envelope
(never 500), and the same API process serves again once the database is back."""

from __future__ import annotations

import uuid

from .conftest import BASE, assert_unavailable, eventually, make_sub_account


async def test_requests_during_a_postgres_restart_get_503_and_the_pool_recovers(stack):
    api = stack.serve()
    account = await make_sub_account(api, stack.create_organisation())
    async with api.client(account.key) as http:
        before = await http.post(
            f"{BASE}/contacts", json={"email": f"before-{uuid.uuid4().hex[:8]}@example.com"}
        )
        assert before.status_code == 201, before.text
        contact_id = before.json()["contact_id"]
        # Warm the pool so the outage hits kept connections as well as new ones.
        for _ in range(5):
            assert (await http.get(f"{BASE}/contacts/{contact_id}")).status_code == 200

        stack.stop_postgres()
        try:
            for _ in range(3):
                assert_unavailable(await http.get(f"{BASE}/contacts/{contact_id}"))
            assert_unavailable(
                await http.post(f"{BASE}/contacts", json={"email": "during@example.com"})
            )
            assert_unavailable(
                await http.patch(f"{BASE}/contacts/{contact_id}", json={"first_name": "Lost"})
            )
            ready = await http.get("/readyz")
            assert ready.status_code == 503
        finally:
            stack.start_postgres()

        async def serving() -> bool:
            return (await http.get(f"{BASE}/contacts/{contact_id}")).status_code == 200

        await eventually(serving, seconds=60)
        after = await http.patch(f"{BASE}/contacts/{contact_id}", json={"first_name": "After"})
        assert after.status_code == 200, after.text
        contact = (await http.get(f"{BASE}/contacts/{contact_id}")).json()["contact"]
        assert contact["first_name"] == "After"
        listed = (await http.get(f"{BASE}/contacts")).json()["contacts"]
        assert "during@example.com" not in [row["email"] for row in listed]
    assert api.process.poll() is None  # the same process, never restarted
