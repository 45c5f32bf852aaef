"""Two-way SMS on Twilio (CONTRACT 7, 9), driven through the local Twilio fake: inbound texts and
status callbacks signed as Twilio signs them, outbound texts from the sub-account's own numbers,
and the conversations they make."""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import pytest

from tenancy.settings import get_settings
from tests.factories import add_contact, import_number, send_message
from tests.helpers import expect_error, tenant_sql
from tests.integrations.fake_twilio import FakeTwilio, twilio_app
from tests.receiver import serving

PUBLIC_URL = "https://switchboard.example.com"
SMS_WEBHOOK = f"{PUBLIC_URL}/webhooks/providers/twilio/sms"
STATUS_WEBHOOK = f"{PUBLIC_URL}/webhooks/providers/twilio/status"
SUBSCRIPTIONS = "/webhooks/inbound/webhook-subscriptions"
CONVERSATIONS = "/webhooks/inbound/conversations"
OURS = "+14155550171"
OURS_NEWER = "+14155550172"
CUSTOMER = "+14155552671"
DEFAULT_SENDER = "+14155550179"
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>'


@pytest.fixture
async def twilio(client):
    """The fake carrier, and the API configured as Twilio's: its auth token, our public URL."""
    state = FakeTwilio()
    app = client.app
    saved = app.config["SETTINGS"]
    app.config["SETTINGS"] = saved.model_copy(
        update={"twilio_auth_token": state.auth_token, "public_url": PUBLIC_URL}
    )
    async with serving(twilio_app(state)) as base:
        state.url = base
        try:
            yield state
        finally:
            app.config["SETTINGS"] = saved


@pytest.fixture
def sending_through(twilio, monkeypatch):
    """Outbound SMS go through the fake Twilio (TWILIO_SMS_FROM its default sender)."""
    twilio.own(DEFAULT_SENDER)
    for name, value in {
        "SWITCHBOARD_TELEPHONY": "twilio",
        "SWITCHBOARD_PUBLIC_URL": PUBLIC_URL,
        "TWILIO_ACCOUNT_SID": twilio.account_sid,
        "TWILIO_AUTH_TOKEN": twilio.auth_token,
        "TWILIO_VOICE_URL": "https://voice.example.com/voice/twilio/twiml",
        "TWILIO_SMS_FROM": DEFAULT_SENDER,
        "TWILIO_API_BASE_URL": twilio.url,
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield twilio
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
async def cancel_undelivered(pool, tenant):
    yield
    await tenant_sql(
        pool,
        tenant,
        "UPDATE webhook_deliveries SET status = 'cancelled', "
        "completed_at = now() WHERE status = 'pending'",
    )


async def hold(client, tenant, twilio, *numbers):
    """The sub-account holds `numbers` (imported, oldest first); the carrier has them too."""
    for number in numbers:
        twilio.own(number)
        await import_number(client, tenant, number)


async def subscribe(client, tenant, receiver, *event_types):
    response = await client.post(
        SUBSCRIPTIONS,
        json={"url": receiver.url(), "events": list(event_types)},
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)


async def events(pool, tenant, event_type):
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT body FROM webhook_deliveries WHERE event_type = $1 ORDER BY created_at, id",
        event_type,
    )
    return [json.loads(row["body"]) for row in rows]


async def stored_messages(pool, tenant):
    return await tenant_sql(pool, tenant, "SELECT * FROM messages ORDER BY created_at, seq")


async def conversation_messages(client, tenant, conversation_id, query=""):
    response = await client.get(
        f"{CONVERSATIONS}/{conversation_id}/messages{query}", headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def conversations(client, tenant, query=""):
    response = await client.get(f"{CONVERSATIONS}{query}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def sent_from_our_number(client, tenant, twilio):
    """A text sent to CUSTOMER from OURS, the sub-account's one number."""
    await hold(client, tenant, twilio, OURS)
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    return await send_message(client, tenant, contact)


# --- inbound ----------------------------------------------------------------------------------


async def test_inbound_sms_joins_a_new_contacts_conversation_unread(
    client, pool, tenant, twilio, worker, receiver
):
    await hold(client, tenant, twilio, OURS)
    await subscribe(client, tenant, receiver, "message.received")

    response = await twilio.receive_sms(
        PUBLIC_URL, CUSTOMER, OURS, "Is it open today?", sid="SM" + "a" * 32, client=client
    )

    assert response.status_code == 200
    assert response.content_type.startswith("text/xml")
    assert await response.get_data(as_text=True) == EMPTY_TWIML
    [contact] = await tenant_sql(pool, tenant, "SELECT id, phone, lead_source FROM contacts")
    assert (contact["phone"], contact["lead_source"]) == (CUSTOMER, "inbound_sms")
    [listed] = (await conversations(client, tenant))["conversations"]
    assert (listed["contact_id"], listed["unread_count"], listed["last_message_preview"]) == (
        str(contact["id"]),
        1,
        "Is it open today?",
    )
    [message] = (await conversation_messages(client, tenant, listed["id"]))["messages"]
    assert (
        message["direction"],
        message["delivery_status"],
        message["provider_message_id"],
        message["sender_type"],
        message["content"],
    ) == ("inbound", "received", "SM" + "a" * 32, "contact", "Is it open today?")
    [event] = await events(pool, tenant, "message.received")
    assert event["type"] == "message.received"
    assert event["data"] == {"sub_account_id": str(tenant.id), "message": message}


async def test_inbound_sms_from_a_known_contact_joins_its_conversation(
    client, pool, tenant, twilio, worker
):
    await hold(client, tenant, twilio, OURS)
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    await twilio.receive_sms(PUBLIC_URL, CUSTOMER, OURS, "Hello", client=client)
    [listed] = (await conversations(client, tenant))["conversations"]
    assert listed["contact_id"] == contact
    assert len(await tenant_sql(pool, tenant, "SELECT id FROM contacts")) == 1


async def test_inbound_stop_and_start_on_twilio_set_sms_consent_once_per_message(
    client, pool, tenant, twilio, worker
):
    await hold(client, tenant, twilio, OURS)
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    sid = "SM" + uuid.uuid4().hex
    for _ in range(2):  # a retried webhook applies the keyword once
        await twilio.receive_sms(PUBLIC_URL, CUSTOMER, OURS, " Stop ", sid=sid, client=client)
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT status, source FROM contact_consents WHERE contact_id = $1 AND channel = 'sms'",
        uuid.UUID(contact),
    )
    assert [tuple(row) for row in rows] == [("revoked", "inbound_keyword")]
    refused = await client.post(
        f"/webhooks/inbound/contacts/{contact}/messages",
        json={"message_type": "sms", "content": "Still there?"},
        headers=tenant.headers,
    )
    await expect_error(refused, 409, "contact_opted_out")

    await twilio.receive_sms(PUBLIC_URL, CUSTOMER, OURS, "START", client=client)
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT status FROM contact_consents WHERE contact_id = $1",
        uuid.UUID(contact),
    )
    assert [row["status"] for row in rows] == ["granted"]


async def test_repeated_message_sid_is_stored_once(client, pool, tenant, twilio, worker):
    await hold(client, tenant, twilio, OURS)
    sid = "SM" + uuid.uuid4().hex
    for _ in range(2):
        response = await twilio.receive_sms(
            PUBLIC_URL, CUSTOMER, OURS, "Hi", sid=sid, client=client
        )
        assert response.status_code == 200
    assert len(await stored_messages(pool, tenant)) == 1


async def test_concurrent_identical_posts_store_one_message(
    client, pool, tenant, twilio, worker, receiver
):
    await hold(client, tenant, twilio, OURS)
    await subscribe(client, tenant, receiver, "message.received")
    params = twilio.inbound_sms(CUSTOMER, OURS, "Once only", "SM" + uuid.uuid4().hex)
    responses = await asyncio.gather(
        *(twilio.post_webhook(SMS_WEBHOOK, params, client) for _ in range(8))
    )
    assert [r.status_code for r in responses] == [200] * 8
    assert len(await stored_messages(pool, tenant)) == 1
    assert len(await tenant_sql(pool, tenant, "SELECT id FROM contacts")) == 1
    assert len(await events(pool, tenant, "message.received")) == 1


@pytest.mark.parametrize(
    "forgery", ["missing", "wrong_token", "other_url", "altered_params", "replayed_elsewhere"]
)
async def test_forged_or_replayed_webhook_is_401_and_writes_nothing(
    client, pool, tenant, twilio, worker, forgery
):
    await hold(client, tenant, twilio, OURS)
    params = twilio.inbound_sms(CUSTOMER, OURS, "Trust me")
    headers = {
        "missing": {},
        "wrong_token": {
            "X-Twilio-Signature": FakeTwilio().signed_headers(SMS_WEBHOOK, params)[
                "X-Twilio-Signature"
            ]
        },
        "other_url": twilio.signed_headers(
            "https://evil.example.com/webhooks/providers/twilio/sms", params
        ),
        "altered_params": twilio.signed_headers(SMS_WEBHOOK, {**params, "Body": "Other"}),
        # A genuine status callback's signature replayed on the SMS webhook.
        "replayed_elsewhere": twilio.signed_headers(STATUS_WEBHOOK, params),
    }[forgery]
    response = await twilio.post_webhook(SMS_WEBHOOK, params, client, headers=headers)
    await expect_error(response, 401, "invalid_signature")
    assert await stored_messages(pool, tenant) == []
    assert await tenant_sql(pool, tenant, "SELECT id FROM contacts") == []


async def test_inbound_sms_to_a_number_nobody_holds_is_answered_and_not_stored(
    client, pool, tenant, twilio, worker
):
    await hold(client, tenant, twilio, OURS)
    response = await twilio.receive_sms(
        PUBLIC_URL, CUSTOMER, "+14155550178", "Anyone?", client=client
    )
    assert response.status_code == 200
    assert await response.get_data(as_text=True) == EMPTY_TWIML
    assert await stored_messages(pool, tenant) == []
    assert await tenant_sql(pool, tenant, "SELECT id FROM contacts") == []


async def test_inbound_sms_reaches_only_the_sub_account_holding_the_number(
    client, pool, tenant, tenant_second, twilio, worker
):
    await hold(client, tenant_second, twilio, OURS)
    await twilio.receive_sms(PUBLIC_URL, CUSTOMER, OURS, "For the second", client=client)
    assert await stored_messages(pool, tenant) == []
    assert len(await stored_messages(pool, tenant_second)) == 1


async def test_inbound_sms_without_a_twilio_auth_token_is_401(client, pool, tenant, twilio, worker):
    await hold(client, tenant, twilio, OURS)
    app = client.app
    configured = app.config["SETTINGS"]
    app.config["SETTINGS"] = configured.model_copy(update={"twilio_auth_token": None})
    try:
        response = await twilio.receive_sms(PUBLIC_URL, CUSTOMER, OURS, "x", client=client)
    finally:
        app.config["SETTINGS"] = configured
    await expect_error(response, 401, "invalid_signature")
    assert await stored_messages(pool, tenant) == []


# --- outbound and status callbacks ------------------------------------------------------------


async def test_outbound_sms_goes_from_the_oldest_number_and_asks_for_status(
    client, pool, tenant, sending_through, worker
):
    twilio = sending_through
    await hold(client, tenant, twilio, OURS, OURS_NEWER)
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    message = await send_message(client, tenant, contact)
    [sent] = twilio.messages.values()
    assert (sent["from"], sent["to"], sent["status_callback"]) == (
        OURS,
        CUSTOMER,
        f"{STATUS_WEBHOOK}?ref={tenant.id}",
    )
    # Importing the numbers pointed their inbound texts at our webhook.
    assert twilio.by_number(OURS)["sms_url"] == SMS_WEBHOOK
    assert (message["direction"], message["delivery_status"], message["provider_message_id"]) == (
        "outbound",
        "sent",
        sent["sid"],
    )


async def test_a_reply_goes_from_the_conversations_last_number(
    client, tenant, sending_through, worker
):
    twilio = sending_through
    await hold(client, tenant, twilio, OURS, OURS_NEWER)
    await twilio.receive_sms(PUBLIC_URL, CUSTOMER, OURS_NEWER, "Hi", client=client)
    contact = (await conversations(client, tenant))["conversations"][0]["contact_id"]
    await send_message(client, tenant, contact)
    [sent] = [m for m in twilio.messages.values()]
    assert sent["from"] == OURS_NEWER


async def test_without_numbers_the_default_sender_is_used(client, tenant, sending_through):
    twilio = sending_through
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    await send_message(client, tenant, contact)
    [sent] = twilio.messages.values()
    assert sent["from"] == DEFAULT_SENDER


async def test_status_callbacks_move_forward_only_and_fire_on_change(
    client, pool, tenant, sending_through, worker, receiver
):
    twilio = sending_through
    await hold(client, tenant, twilio, OURS)
    await subscribe(client, tenant, receiver, "message.status_updated")
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    message = await send_message(client, tenant, contact)
    sid = message["provider_message_id"]

    for status in ("queued", "sent", "delivered", "sent", "delivered", "failed", "undelivered"):
        response = await twilio.report_status(sid, status, client=client)
        assert response.status_code == 200, status
        assert await response.get_data(as_text=True) == EMPTY_TWIML

    [shown] = (await conversation_messages(client, tenant, message["conversation_id"]))["messages"]
    assert shown["delivery_status"] == "delivered"
    [event] = await events(pool, tenant, "message.status_updated")
    assert event["data"] == {"sub_account_id": str(tenant.id), "message": shown}


async def test_a_failed_delivery_is_recorded_with_the_carriers_error(
    client, pool, tenant, sending_through, worker
):
    twilio = sending_through
    message = await sent_from_our_number(client, tenant, twilio)
    await twilio.report_status(
        message["provider_message_id"], "undelivered", "30003", client=client
    )
    [row] = await stored_messages(pool, tenant)
    assert (row["status"], row["error"]) == ("undelivered", "carrier error 30003")


async def test_status_callback_for_an_unknown_message_changes_nothing(
    client, pool, tenant, sending_through, worker
):
    twilio = sending_through
    await sent_from_our_number(client, tenant, twilio)
    params = {
        "MessageSid": "SM" + uuid.uuid4().hex,
        "MessageStatus": "delivered",
        "From": OURS,
        "To": CUSTOMER,
    }
    response = await twilio.post_webhook(STATUS_WEBHOOK, params, client)
    assert response.status_code == 200
    [row] = await stored_messages(pool, tenant)
    assert row["status"] == "sent"
    assert await events(pool, tenant, "message.status_updated") == []


async def test_a_status_reported_before_the_send_stored_the_id_is_applied(
    client, pool, tenant, sending_through, worker, receiver
):
    """Twilio's first callback can arrive while the request that sent the text still waits
    for Twilio's answer, so before the message has its id: the report is not lost."""
    twilio = sending_through
    await hold(client, tenant, twilio, OURS)
    await subscribe(client, tenant, receiver, "message.status_updated")
    twilio.report_before_answer, twilio.api_client = "delivered", client
    contact = await add_contact(client, tenant, phone=CUSTOMER)

    message = await send_message(client, tenant, contact)

    [sent] = twilio.messages.values()
    assert (message["provider_message_id"], message["delivery_status"]) == (
        sent["sid"],
        "delivered",
    )
    [row] = await stored_messages(pool, tenant)
    assert row["status"] == "delivered"
    [event] = await events(pool, tenant, "message.status_updated")
    assert event["data"]["message"]["delivery_status"] == "delivered"
    assert await tenant_sql(pool, tenant, "SELECT * FROM message_status_reports") == []
    # A later, lesser report changes nothing.
    await twilio.report_status(sent["sid"], "sent", client=client)
    assert [row["status"] for row in await stored_messages(pool, tenant)] == ["delivered"]


async def test_a_text_from_the_default_sender_takes_its_status_callbacks(
    client, pool, tenant, tenant_second, sending_through, worker
):
    """TWILIO_SMS_FROM belongs to no sub-account: the callback URL names the sender."""
    twilio = sending_through
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    message = await send_message(client, tenant, contact)
    [sent] = twilio.messages.values()
    assert sent["from"] == DEFAULT_SENDER

    await twilio.report_status(sent["sid"], "undelivered", "30005", client=client)

    [row] = await stored_messages(pool, tenant)
    assert (row["id"], row["status"], row["error"]) == (
        uuid.UUID(message["id"]),
        "undelivered",
        "carrier error 30005",
    )
    # Signed for another sub-account, the same report finds nothing there.
    other = f"{STATUS_WEBHOOK}?ref={tenant_second.id}"
    response = await twilio.post_webhook(other, twilio.status_params(sent["sid"], "failed"), client)
    assert response.status_code == 200
    assert await stored_messages(pool, tenant_second) == []
    assert [row["status"] for row in await stored_messages(pool, tenant)] == ["undelivered"]


async def test_forged_status_callback_is_401_and_changes_nothing(
    client, pool, tenant, sending_through, worker
):
    twilio = sending_through
    message = await sent_from_our_number(client, tenant, twilio)
    params = twilio.status_params(message["provider_message_id"], "delivered")
    response = await twilio.post_webhook(
        STATUS_WEBHOOK, params, client, headers=twilio.signed_headers(SMS_WEBHOOK, params)
    )
    await expect_error(response, 401, "invalid_signature")
    [row] = await stored_messages(pool, tenant)
    assert row["status"] == "sent"


async def test_sandbox_sms_ids_look_like_twilios_and_are_sent(client, tenant):
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    message = await send_message(client, tenant, contact)
    assert re.fullmatch(r"SM[0-9a-f]{32}", message["provider_message_id"])
    assert (message["direction"], message["delivery_status"]) == ("outbound", "sent")


async def test_inbound_sms_with_a_nul_in_its_body_is_kept_without_it(
    client, pool, tenant, twilio, worker
):
    await hold(client, tenant, twilio, OURS)
    response = await twilio.receive_sms(PUBLIC_URL, CUSTOMER, OURS, "a\x00b", client=client)
    assert response.status_code == 200
    [row] = await stored_messages(pool, tenant)
    assert row["content"] == "ab"


async def test_sms_campaign_goes_from_the_sub_accounts_number_and_takes_status(
    client, pool, migrated, tenant, sending_through, worker
):
    from api.campaigns.delivery import run_campaign
    from tests.factories import create_campaign
    from tests.helpers import schedule, scope_of, soon

    twilio = sending_through
    await hold(client, tenant, twilio, OURS)
    contact = await add_contact(client, tenant, phone=CUSTOMER)
    campaign = await create_campaign(
        client,
        tenant,
        campaign_type="sms",
        subject=None,
        message_content="Sale today!",
        contact_ids=[contact],
    )
    await schedule(client, tenant, campaign["id"], soon(3600))
    await tenant_sql(
        pool,
        tenant,
        "UPDATE campaigns SET start_date = now() - interval '1 s' WHERE id = $1",
        uuid.UUID(campaign["id"]),
    )

    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))

    [sent] = twilio.messages.values()
    assert (sent["from"], sent["to"], sent["status_callback"]) == (
        OURS,
        CUSTOMER,
        f"{STATUS_WEBHOOK}?ref={tenant.id}",
    )
    await twilio.report_status(sent["sid"], "delivered", client=client)
    [row] = await stored_messages(pool, tenant)
    assert (row["status"], row["phone_number"], row["provider_message_id"]) == (
        "delivered",
        OURS,
        sent["sid"],
    )
