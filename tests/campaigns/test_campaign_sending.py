"""Campaigns sent by the real worker at start_date: once per recipient, charged once, tracked."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from decimal import Decimal

from api.campaigns.delivery import run_campaign
from api.campaigns.tasks import send_campaign
from tenancy.clock import utcnow
from tenancy.db import tenant_transaction
from tenancy.due import DueWork
from tenancy.settings import Settings
from tests.factories import CAMPAIGNS, EMAIL_PRICE, SMS_PRICE, add_contact, create_campaign, credit
from tests.helpers import (
    balance,
    contact_email,
    get_campaign,
    ledger,
    recipients,
    schedule,
    scope_of,
    soon,
    tracking_links,
    wait_for_status,
)


async def _make_due(pool, tenant, campaign_id):
    """Move a scheduled campaign's start into the past, as if its time had come."""
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET start_date = now() - interval '1 second' WHERE id = $1",
            uuid.UUID(campaign_id),
        )


async def test_scheduled_email_arrives_once_charged_once_and_completes(
    client, pool, tenant_priced, mailbox, worker
):
    tenant = tenant_priced
    await credit(client, tenant, 10)
    contacts = [await add_contact(client, tenant) for _ in range(3)]
    campaign = await create_campaign(client, tenant, contact_ids=contacts)
    start = soon(2)
    response = await schedule(client, tenant, campaign["id"], start)
    assert response.status_code == 200

    done = await wait_for_status(client, tenant, campaign["id"], "completed")

    assert (done["contacted"], done["success"], done["pending"], done["progress"]) == (3, 3, 0, 100)
    for contact in contacts:
        address = await contact_email(pool, tenant, contact)
        received = mailbox.to(address)
        assert len(received) == 1
        assert received[0]["Message-ID"] == f"<{campaign['id']}.{contact}@switchboard>"
        assert received[0]["Subject"] == "Spring sale"
        assert received[0]["List-Unsubscribe"].startswith("<http")
    charges = await ledger(pool, tenant)
    assert len(charges) == 3
    assert {row["reference_id"] for row in charges} == {
        row["id"] for row in await recipients(pool, tenant, campaign["id"])
    }
    assert all(row["amount"] == -EMAIL_PRICE for row in charges)
    assert await balance(pool, tenant) == Decimal("10") - 3 * EMAIL_PRICE
    assert all(row["sent_at"] >= start for row in await recipients(pool, tenant, campaign["id"]))


async def test_reschedule_sends_nothing_at_the_old_time(client, pool, tenant, mailbox, worker):
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[contact])
    old = soon(1)
    await schedule(client, tenant, campaign["id"], old)
    new = soon(4)
    response = await schedule(client, tenant, campaign["id"], new)
    assert response.status_code == 200

    await wait_for_status(client, tenant, campaign["id"], "completed")

    (recipient,) = await recipients(pool, tenant, campaign["id"])
    assert recipient["sent_at"] >= new
    assert len(mailbox.to(recipient["email"])) == 1


async def test_cancelled_campaign_is_never_sent(client, pool, tenant, mailbox, worker):
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[contact])
    await schedule(client, tenant, campaign["id"], soon(1))
    await client.post(f"{CAMPAIGNS}/{campaign['id']}/cancel", headers=tenant.headers)
    # A later campaign to the same contact, scheduled after: once it is done, the first had
    # its chance too.
    second = await create_campaign(client, tenant, contact_ids=[contact], subject="Second")
    await schedule(client, tenant, second["id"], soon(2))
    await wait_for_status(client, tenant, second["id"], "completed")
    address = await contact_email(pool, tenant, contact)
    assert [message["Subject"] for message in mailbox.to(address)] == ["Second"]
    assert (await get_campaign(client, tenant, campaign["id"]))["status"] == "cancelled"


async def test_send_job_run_twice_at_once_sends_and_charges_once(
    client, pool, migrated, tenant_priced, mailbox
):
    tenant = tenant_priced
    await credit(client, tenant, 10)
    contacts = [await add_contact(client, tenant) for _ in range(12)]
    campaign = await create_campaign(client, tenant, contact_ids=contacts)
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])
    ctx = {"db": pool, "database_url": migrated}
    work = DueWork(
        uuid.uuid4(),
        tenant.id,
        tenant.schema,
        "campaign_send",
        uuid.UUID(campaign["id"]),
        utcnow(),
        1,
        1,
    )

    await asyncio.gather(
        send_campaign(ctx, work),
        send_campaign(ctx, work),
        run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"])),
    )
    # Whichever found the campaign busy comes back later; by then there is nothing left.
    assert await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"])) is None

    done = await get_campaign(client, tenant, campaign["id"])
    assert (done["status"], done["success"], done["pending"]) == ("completed", 12, 0)
    for contact in contacts:
        assert len(mailbox.to(await contact_email(pool, tenant, contact))) == 1
    charges = await ledger(pool, tenant)
    assert len(charges) == 12 == len({row["reference_id"] for row in charges})


async def test_parallel_senders_claim_each_recipient_once(
    client, pool, migrated, tenant_priced, mailbox
):
    tenant = tenant_priced
    await credit(client, tenant, 10)
    contacts = [await add_contact(client, tenant) for _ in range(25)]
    campaign = await create_campaign(client, tenant, contact_ids=contacts)
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])
    settings = Settings(SWITCHBOARD_CAMPAIGN_CONCURRENCY=6, SWITCHBOARD_CAMPAIGN_BATCH_SIZE=2)

    assert (
        await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]), settings)
        is None
    )

    rows = await recipients(pool, tenant, campaign["id"])
    assert sorted(row["state"] for row in rows) == ["sent"] * 25
    for row in rows:
        assert len(mailbox.to(row["email"])) == 1
    assert len(await ledger(pool, tenant)) == 25


async def test_insufficient_balance_pauses_with_a_reason_then_resume_finishes(
    client, pool, migrated, tenant_priced, mailbox
):
    tenant = tenant_priced
    await credit(client, tenant, float(2 * EMAIL_PRICE))
    contacts = [await add_contact(client, tenant) for _ in range(3)]
    campaign = await create_campaign(client, tenant, contact_ids=contacts)
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])

    assert await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"])) is None

    paused = await get_campaign(client, tenant, campaign["id"])
    assert paused["status"] == "paused"
    assert paused["paused_reason"].startswith("insufficient_funds")
    assert (paused["success"], paused["contacted"], paused["pending"]) == (2, 2, 1)
    assert await balance(pool, tenant) == 0
    rows = await recipients(pool, tenant, campaign["id"])
    unsent = [row for row in rows if row["state"] == "pending"]
    assert len(unsent) == 1 and unsent[0]["charged_amount"] is None
    assert mailbox.to(unsent[0]["email"]) == []
    charges = await ledger(pool, tenant)
    assert [row["status"] for row in charges].count("posted") == 2
    assert [row["status"] for row in charges].count("declined") == 1

    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 409
    await credit(client, tenant, 1)
    response = await client.post(f"{CAMPAIGNS}/{campaign['id']}/resume", headers=tenant.headers)
    assert response.status_code == 200
    assert (await response.get_json())["campaign"]["status"] == "sending"
    assert await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"])) is None

    done = await get_campaign(client, tenant, campaign["id"])
    assert (done["status"], done["success"], done["pending"]) == ("completed", 3, 0)
    assert len(mailbox.to(unsent[0]["email"])) == 1
    posted = [row for row in await ledger(pool, tenant) if row["status"] == "posted"]
    assert len(posted) == 3 == len({row["reference_id"] for row in posted})


async def test_smart_list_recipients_are_contacts_with_any_of_its_tags(
    client, pool, migrated, tenant, mailbox
):
    vip = await add_contact(client, tenant, tags=["VIP"])
    lead = await add_contact(client, tenant, tags=["lead", "other"])
    other = await add_contact(client, tenant, tags=["other"])
    response = await client.post(
        "/webhooks/inbound/smart-lists",
        json={"name": "Hot", "tags": ["vip", "lead"]},
        headers=tenant.headers,
    )
    smart_list = (await response.get_json())["smart_list"]["id"]
    campaign = await create_campaign(client, tenant, smart_list_id=smart_list, contact_ids=[vip])
    assert campaign["pending"] == 2
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])

    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))

    rows = await recipients(pool, tenant, campaign["id"])
    assert {str(row["contact_id"]) for row in rows} == {vip, lead}
    assert mailbox.to(await contact_email(pool, tenant, other)) == []


async def test_tracking_links_count_opens_clicks_and_unsubscribes_once(
    client, pool, migrated, tenant, mailbox
):
    first, second = await add_contact(client, tenant), await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[first, second])
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))
    (message,) = mailbox.to(await contact_email(pool, tenant, first))
    links = tracking_links(message)

    for _ in range(2):
        response = await client.get(links["open"])
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "image/gif"
        response = await client.get(links["click"])
        assert response.status_code == 302
        assert response.headers["Location"] == "https://example.com/offer?a=1&b=2"
        response = await client.get(links["unsubscribe"])
        assert response.status_code == 200

    counted = await get_campaign(client, tenant, campaign["id"])
    assert (counted["opened_count"], counted["clicked_count"], counted["unsubscribed_count"]) == (
        1,
        1,
        1,
    )


async def test_forged_or_altered_tracking_links_are_404_and_count_nothing(
    client, pool, migrated, tenant, mailbox
):
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[contact])
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))
    (message,) = mailbox.to(await contact_email(pool, tenant, contact))
    links = tracking_links(message)
    body, mac = links["unsubscribe"].rsplit("/", 1)[1].split(".")
    tampered = ("A" if body[5] != "A" else "B").join([body[:5], body[6:]])

    for path in (
        f"/track/unsubscribe/{tampered}.{mac}",
        "/track/open/abc.def",
        links["open"].replace("/open/", "/unsubscribe/"),
        "/track/click/x",
    ):
        response = await client.get(path)
        assert response.status_code == 404, path

    counted = await get_campaign(client, tenant, campaign["id"])
    assert (counted["opened_count"], counted["unsubscribed_count"]) == (0, 0)


async def test_unsubscribed_contact_gets_no_further_campaign_email(
    client, pool, migrated, tenant, mailbox
):
    leaving, staying = await add_contact(client, tenant), await add_contact(client, tenant)
    first = await create_campaign(client, tenant, contact_ids=[leaving, staying])
    await schedule(client, tenant, first["id"], soon(3600))
    await _make_due(pool, tenant, first["id"])
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(first["id"]))
    address = await contact_email(pool, tenant, leaving)
    (message,) = mailbox.to(address)
    response = await client.post(tracking_links(message)["unsubscribe"])
    assert response.status_code == 200

    second = await create_campaign(client, tenant, contact_ids=[leaving, staying], subject="Again")
    await schedule(client, tenant, second["id"], soon(3600))
    await _make_due(pool, tenant, second["id"])
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(second["id"]))

    assert [m["Subject"] for m in mailbox.to(address)] == ["Spring sale"]
    assert [m["Subject"] for m in mailbox.to(await contact_email(pool, tenant, staying))] == [
        "Spring sale",
        "Again",
    ]
    done = await get_campaign(client, tenant, second["id"])
    assert (done["status"], done["contacted"], done["success"]) == ("completed", 1, 1)


async def test_campaign_sends_join_the_contacts_conversation(
    client, pool, migrated, tenant, mailbox
):
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[contact])
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))

    response = await client.get(
        f"/functions/v1/crm-api/get-contact-messages/{contact}", headers=tenant.headers
    )
    assert response.status_code == 200
    (message,) = (await response.get_json())["messages"]
    assert (message["message_type"], message["sender_type"]) == ("email", "agent")


async def test_sms_campaign_goes_through_the_sandbox_provider(
    client, pool, migrated, tenant_priced
):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    good = await add_contact(client, tenant, phone="+14155550123")
    refused = await add_contact(client, tenant, phone="+14155550199")
    campaign = await create_campaign(
        client,
        tenant,
        campaign_type="sms",
        subject=None,
        message_content="Sale today!",
        contact_ids=[good, refused],
    )
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])

    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))

    done = await get_campaign(client, tenant, campaign["id"])
    assert (done["status"], done["contacted"], done["success"]) == ("completed", 2, 1)
    states = {
        str(row["contact_id"]): row["state"]
        for row in await recipients(pool, tenant, campaign["id"])
    }
    assert states == {good: "sent", refused: "failed"}
    # The refused message was refunded: one net charge.
    assert await balance(pool, tenant) == Decimal("1") - SMS_PRICE


async def test_business_hours_defer_the_send_to_the_next_opening(
    client, pool, migrated, tenant, mailbox
):
    contact = await add_contact(client, tenant)
    tomorrow = utcnow() + timedelta(days=1)
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[tomorrow.weekday()]
    campaign = await create_campaign(
        client,
        tenant,
        contact_ids=[contact],
        business_hours_enabled=True,
        business_hours_config={"timezone": "UTC", "days": [day], "start": "00:00", "end": "23:59"},
    )
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])

    again_at = await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))

    opening = tomorrow.replace(hour=0, minute=0, second=0, microsecond=0)
    assert again_at == opening
    deferred = await get_campaign(client, tenant, campaign["id"])
    assert deferred["status"] == "scheduled"
    assert deferred["start_date"] == opening.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert mailbox.to(await contact_email(pool, tenant, contact)) == []


async def test_a_claim_of_only_opted_out_contacts_does_not_stop_the_sender(
    client, pool, migrated, tenant, mailbox
):
    leaving = [await add_contact(client, tenant) for _ in range(4)]
    staying = [await add_contact(client, tenant) for _ in range(2)]
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.executemany(
            "INSERT INTO contact_consents (contact_id, channel, status, source) "
            "VALUES ($1, 'email', 'revoked', 'api')",
            [(uuid.UUID(contact),) for contact in leaving],
        )
    campaign = await create_campaign(client, tenant, contact_ids=leaving + staying)
    assert campaign["pending"] == 2
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])
    one_by_two = Settings(SWITCHBOARD_CAMPAIGN_CONCURRENCY=1, SWITCHBOARD_CAMPAIGN_BATCH_SIZE=2)

    assert (
        await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]), one_by_two)
        is None
    )

    done = await get_campaign(client, tenant, campaign["id"])
    assert (done["status"], done["contacted"], done["success"], done["progress"]) == (
        "completed",
        2,
        2,
        100,
    )
    for contact in staying:
        assert len(mailbox.to(await contact_email(pool, tenant, contact))) == 1
    for contact in leaving:
        assert mailbox.to(await contact_email(pool, tenant, contact)) == []


async def test_due_campaign_is_sent_although_its_queued_job_was_lost(
    client, pool, tenant, mailbox, run_worker
):
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[contact])
    # No worker listens while it is scheduled, so nothing reaches Redis: only PostgreSQL knows.
    await schedule(client, tenant, campaign["id"], soon(3600))
    await _make_due(pool, tenant, campaign["id"])
    await pool.execute(
        "UPDATE control.due_work SET due_at = now() WHERE ref_id = $1", uuid.UUID(campaign["id"])
    )

    await run_worker()

    done = await get_campaign(client, tenant, campaign["id"])
    assert (done["status"], done["success"]) == ("completed", 1)
    assert len(mailbox.to(await contact_email(pool, tenant, contact))) == 1
