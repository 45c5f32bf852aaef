"""SMS goes through the telephony interface: the Twilio adapter's Messages API, end to end."""

from __future__ import annotations

import pytest

from integrations.telephony import TelephonyError
from integrations.telephony.twilio import TwilioTelephony
from tenancy.settings import get_settings
from tests.factories import make_contact
from tests.receiver import serving

from .fake_twilio import FakeTwilio, twilio_app

VOICE_URL = "https://bridge.example.com/twilio/voice"
SENDER = "+14155550150"


@pytest.fixture
async def twilio():
    state = FakeTwilio()
    state.own(SENDER)
    async with serving(twilio_app(state)) as base:
        state.url = base
        yield state


async def test_send_sms_posts_to_the_messages_api_and_returns_its_sid(twilio):
    adapter = TwilioTelephony(
        twilio.account_sid, twilio.auth_token, VOICE_URL, base_url=twilio.url, sms_from=SENDER
    )
    try:
        sid = await adapter.send_sms(None, "+14155552671", "Hello", "msg-1")
    finally:
        await adapter.aclose()
    assert twilio.messages[sid] == {
        "sid": sid,
        "to": "+14155552671",
        "from": SENDER,
        "body": "Hello",
    }


async def test_send_sms_refused_or_without_a_sender_raises_telephony_error(twilio):
    adapter = TwilioTelephony(twilio.account_sid, twilio.auth_token, VOICE_URL, base_url=twilio.url)
    try:
        with pytest.raises(TelephonyError, match="sender"):
            await adapter.send_sms(None, "+14155552671", "Hello", "msg-2")
        with pytest.raises(TelephonyError, match="21606"):
            await adapter.send_sms("+14155550999", "+14155552671", "Hello", "msg-3")
    finally:
        await adapter.aclose()
    assert twilio.messages == {}


async def test_contact_sms_is_sent_through_twilio_when_configured(
    client, tenant, twilio, monkeypatch
):
    for name, value in {
        "SWITCHBOARD_TELEPHONY": "twilio",
        "TWILIO_ACCOUNT_SID": twilio.account_sid,
        "TWILIO_AUTH_TOKEN": twilio.auth_token,
        "TWILIO_VOICE_URL": VOICE_URL,
        "TWILIO_SMS_FROM": SENDER,
        "TWILIO_API_BASE_URL": twilio.url,
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        contact_id = await make_contact(client, tenant, phone="+14155552671")
        response = await client.post(
            f"/webhooks/inbound/contacts/{contact_id}/messages",
            json={"message_type": "sms", "content": "Your order"},
            headers=tenant.headers,
        )
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert response.status_code == 201, await response.get_data(as_text=True)
    [sent] = twilio.messages.values()
    assert (sent["to"], sent["from"], sent["body"]) == ("+14155552671", SENDER, "Your order")
