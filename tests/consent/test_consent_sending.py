"""Consent at sending time: unsubscribe links write it, calls and campaigns obey it."""

from __future__ import annotations

import asyncio
import random
import uuid
from decimal import Decimal

import pytest

from api.campaigns.delivery import run_campaign
from api.consent.service import set_consent
from tenancy.db import tenant_transaction
from tenancy.settings import Settings
from tests.consent.conftest import consent_events
from tests.factories import (
    CONTACTS,
    EMAIL_PRICE,
    add_contact,
    assign,
    create_campaign,
    credit,
    import_number,
    make_agent,
    make_contact,
    priced_tenant,
)
from tests.helpers import (
    balance,
    contact_email,
    expect_error,
    get_campaign,
    ledger,
    recipients,
    schedule,
    scope_of,
    soon,
    tenant_sql,
    tracking_links,
)


async def consent_of(client, tenant, contact):
    response = await client.get(f"{CONTACTS}/{contact}/consent", headers=tenant.headers)
    return (await response.get_json())["consent"]


async def due_campaign(client, pool, tenant, contacts, **fields):
    campaign = await create_campaign(client, tenant, contact_ids=contacts, **fields)
    await schedule(client, tenant, campaign["id"], soon(3600))
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET start_date = now() - interval '1 second' WHERE id = $1",
            uuid.UUID(campaign["id"]),
        )
    return campaign


async def sent_campaign_message(client, pool, migrated, tenant, mailbox, contact):
    campaign = await due_campaign(client, pool, tenant, [contact])
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))
    (message,) = mailbox.to(await contact_email(pool, tenant, contact))
    return message


# --- the unsubscribe link and the one-click header ----------------------------------------------


@pytest.mark.parametrize(
    ("method", "source"), [("GET", "unsubscribe_link"), ("POST", "campaign_unsubscribe_header")]
)
async def test_campaign_unsubscribe_revokes_email_with_its_source_and_fires_once(
    client, pool, migrated, subscribed, mailbox, method, source
):
    tenant = subscribed
    contact = await add_contact(client, tenant)
    message = await sent_campaign_message(client, pool, migrated, tenant, mailbox, contact)

    for _ in range(2):
        response = await client.open(tracking_links(message)["unsubscribe"], method=method)
        assert response.status_code == 200

    email = (await consent_of(client, tenant, contact))["email"]
    assert (email["status"], email["source"]) == ("revoked", source)
    assert await consent_events(pool, tenant) == [
        {
            "sub_account_id": str(tenant.id),
            "contact_id": contact,
            "channel": "email",
            "status": "revoked",
            "source": source,
        }
    ]


async def test_put_grants_email_again_after_an_unsubscribe_and_campaigns_reach_it_again(
    client, pool, migrated, tenant, mailbox
):
    contact = await add_contact(client, tenant)
    message = await sent_campaign_message(client, pool, migrated, tenant, mailbox, contact)
    await client.get(tracking_links(message)["unsubscribe"])
    response = await client.put(
        f"{CONTACTS}/{contact}/consent",
        headers=tenant.headers,
        json={"channel": "email", "status": "granted"},
    )
    assert response.status_code == 200

    again = await due_campaign(client, pool, tenant, [contact], subject="Again")
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(again["id"]))

    subjects = [m["Subject"] for m in mailbox.to(await contact_email(pool, tenant, contact))]
    assert subjects == ["Spring sale", "Again"]


# --- calls ------------------------------------------------------------------------------------


async def test_a_call_to_a_contact_who_revoked_calls_is_409_and_not_placed(
    client, pool, agency, worker
):
    tenant = await priced_tenant(client, agency, call_per_minute=0.25)
    await credit(client, tenant, 5)
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155550124")
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    contact = await make_contact(client, tenant)
    await client.put(
        f"{CONTACTS}/{contact}/consent",
        headers=tenant.headers,
        json={"channel": "call", "status": "revoked"},
    )

    response = await client.post(
        f"{CONTACTS}/{contact}/call", headers=tenant.headers, json={"agent_id": agent_id}
    )

    await expect_error(response, 409, "contact_opted_out")
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []
    assert await balance(pool, tenant) == Decimal("5")


# --- campaigns --------------------------------------------------------------------------------


async def test_a_revocation_committed_before_the_campaign_sends_is_never_sent_to(
    client, pool, migrated, tenant_priced, mailbox
):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    leaving, staying = await add_contact(client, tenant), await add_contact(client, tenant)
    campaign = await due_campaign(client, pool, tenant, [leaving, staying])
    await client.put(
        f"{CONTACTS}/{leaving}/consent",
        headers=tenant.headers,
        json={"channel": "email", "status": "revoked"},
    )

    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))

    assert mailbox.to(await contact_email(pool, tenant, leaving)) == []
    assert len(mailbox.to(await contact_email(pool, tenant, staying))) == 1
    states = {
        str(row["contact_id"]): (row["state"], row["error"])
        for row in await recipients(pool, tenant, campaign["id"])
    }
    assert states == {leaving: ("skipped", "opted_out"), staying: ("sent", None)}
    assert await balance(pool, tenant) == Decimal("1") - EMAIL_PRICE
    done = await get_campaign(client, tenant, campaign["id"])
    assert (done["status"], done["contacted"], done["success"]) == ("completed", 1, 1)


async def test_a_revoked_sms_channel_skips_only_sms_campaigns(
    client, pool, migrated, tenant, mailbox
):
    contact = await add_contact(
        client, tenant, email="both-" + uuid.uuid4().hex[:8] + "@example.com", phone="+14155550152"
    )
    await client.put(
        f"{CONTACTS}/{contact}/consent",
        headers=tenant.headers,
        json={"channel": "sms", "status": "revoked"},
    )
    texts = await due_campaign(
        client,
        pool,
        tenant,
        [contact],
        campaign_type="sms",
        subject=None,
        message_content="Sale today",
    )
    assert texts["pending"] == 0
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(texts["id"]))
    ((state, error),) = [
        (row["state"], row["error"]) for row in await recipients(pool, tenant, texts["id"])
    ]
    assert (state, error) == ("skipped", "opted_out")

    await sent_campaign_message(client, pool, migrated, tenant, mailbox, contact)


async def test_concurrent_revocations_never_reach_a_recipient_claimed_after_them(
    client, pool, migrated, tenant_priced, mailbox
):
    """Revocations race a campaign that claims one recipient at a time. Any recipient claimed
    (its claim transaction began) after a revocation committed is skipped and not charged;
    every recipient is sent at most once or skipped."""
    tenant = tenant_priced
    await credit(client, tenant, 10)
    contacts = [await add_contact(client, tenant) for _ in range(24)]
    campaign = await due_campaign(client, pool, tenant, contacts)
    revoking = random.sample(contacts, 12)
    committed: dict[str, object] = {}

    async def revoke_all() -> None:
        for contact in revoking:
            async with tenant_transaction(pool, tenant.schema) as conn:
                await set_consent(conn, uuid.UUID(contact), "email", "revoked", "api")
            # The revocation committed before this instant.
            committed[contact] = await pool.fetchval("SELECT clock_timestamp()")
            await asyncio.sleep(0.005)

    one_at_a_time = Settings(SWITCHBOARD_CAMPAIGN_CONCURRENCY=2, SWITCHBOARD_CAMPAIGN_BATCH_SIZE=1)
    await asyncio.gather(
        run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]), one_at_a_time),
        revoke_all(),
    )

    rows = {
        str(row["contact_id"]): row
        for row in await tenant_sql(
            pool,
            tenant,
            "SELECT id, contact_id, state, claimed_at FROM campaign_recipients "
            "WHERE campaign_id = $1",
            uuid.UUID(campaign["id"]),
        )
    }
    for contact in contacts:
        row = rows[contact]
        received = mailbox.to(await contact_email(pool, tenant, contact))
        assert row["state"] in ("sent", "skipped"), row
        assert len(received) == (1 if row["state"] == "sent" else 0)
        if contact in committed and row["claimed_at"] > committed[contact]:
            assert row["state"] == "skipped", (row, committed[contact])
        if contact not in revoking:
            assert row["state"] == "sent"
    sent = {rows[contact]["id"] for contact in contacts if rows[contact]["state"] == "sent"}
    assert {row["reference_id"] for row in await ledger(pool, tenant)} == sent
    assert await balance(pool, tenant) == Decimal("10") - EMAIL_PRICE * len(sent)
