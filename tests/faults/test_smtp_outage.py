"""The SMTP server down.

- add-subaccount-user with the email server down answers 502 with the invitation token kept:
  tests/agency/test_add_subaccount_user.py::test_email_failure_is_502_with_token_and_invitation_kept
  (and ::test_create_with_email_down_still_creates_and_returns_token); not repeated here.
- A worker killed with SIGKILL mid-campaign and restarted: tests/campaigns/test_worker_crash.py.
- Here: a campaign sent while the SMTP server is down keeps `sending` and sends nothing (the
  recipient it was sending is released, charged once); its send is retried later on its own,
  and once SMTP is back it completes with every recipient getting exactly one email.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from tenancy.clock import utcnow

from .conftest import BASE, eventually, make_sub_account

CAMPAIGNS = f"{BASE}/campaigns"
RECIPIENTS = 6


async def test_campaign_with_smtp_down_is_retried_and_sends_each_recipient_once(stack):
    api = stack.serve()
    stack.smtp.stop()
    stack.worker(SWITCHBOARD_CAMPAIGN_PROVIDER_RETRY_SECONDS="2")
    account = await make_sub_account(api, stack.create_organisation())
    async with api.client(account.key) as http:
        addresses = [f"rcpt-{uuid.uuid4().hex[:10]}@example.com" for _ in range(RECIPIENTS)]
        contact_ids = []
        for address in addresses:
            created = await http.post(f"{BASE}/contacts", json={"email": address})
            assert created.status_code == 201, created.text
            contact_ids.append(created.json()["contact_id"])
        created = await http.post(
            CAMPAIGNS,
            json={
                "name": "Outage",
                "campaign_type": "email",
                "subject": "Outage",
                "message_content": "<html><body><p>Hello</p></body></html>",
                "contact_ids": contact_ids,
            },
        )
        assert created.status_code == 201, created.text
        campaign_id = created.json()["campaign"]["id"]
        start = (utcnow() + timedelta(seconds=1)).isoformat()
        scheduled = await http.post(
            f"{CAMPAIGNS}/{campaign_id}/schedule", json={"start_date": start}
        )
        assert scheduled.status_code == 200, scheduled.text

        async def campaign_in(*statuses: str) -> dict | None:
            answer = await http.get(f"{CAMPAIGNS}/{campaign_id}")
            assert answer.status_code == 200, answer.text
            campaign = answer.json()["campaign"]
            return campaign if campaign["status"] in statuses else None

        await eventually(lambda: campaign_in("sending"), seconds=120)
        await asyncio.sleep(5)  # several attempts while the server is down
        stalled = await campaign_in("sending")
        assert stalled is not None and stalled["success"] == 0
        assert stack.smtp.box.messages == []

        stack.smtp.start()  # no resume: the campaign's own retry picks it up
        done = await eventually(lambda: campaign_in("completed"), seconds=120)

    assert (done["success"], done["pending"], done["contacted"]) == (RECIPIENTS, 0, RECIPIENTS)
    for address in addresses:
        assert len(stack.smtp.box.to(address)) == 1, address
    assert len(stack.smtp.box.messages) == RECIPIENTS
