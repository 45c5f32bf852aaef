"""The Twilio adapter against a local server that speaks Twilio's REST API, directly and
through the API with SWITCHBOARD_TELEPHONY=twilio."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest

from integrations.telephony import (
    HeldNumber,
    NoNumbersAvailable,
    OutboundCall,
    TelephonyError,
)
from integrations.telephony.twilio import (
    TwilioTelephony,
    answered_by,
    default_voice_url,
    signature,
    signature_valid,
)
from tests.factories import assign, make_agent, make_contact, priced_tenant
from tests.helpers import balance
from tests.receiver import serving

from .fake_twilio import FakeTwilio, twilio_app, worker_on_twilio

VOICE_URL = "https://bridge.example.com/twilio/voice"


@pytest.fixture
async def twilio():
    state = FakeTwilio()
    async with serving(twilio_app(state)) as base:
        state.url = base
        yield state


@pytest.fixture
async def adapter(twilio):
    provider = TwilioTelephony(
        twilio.account_sid, twilio.auth_token, VOICE_URL, base_url=twilio.url
    )
    yield provider
    await provider.aclose()


def held(twilio, number, sid, *, purchased=True, rule=None):
    return HeldNumber(number, sid, purchased, rule)


async def test_purchase_buys_the_first_offered_number_not_excluded(twilio, adapter):
    twilio.available["415"] = ["+14155550100", "+14155550101"]
    bought = await adapter.purchase_number("415", frozenset({"+14155550100"}))
    assert bought.phone_number == "+14155550101"
    assert twilio.incoming[bought.provider_ref]["phone_number"] == "+14155550101"
    assert (
        "POST",
        f"/2010-04-01/Accounts/{twilio.account_sid}/IncomingPhoneNumbers.json",
        {"PhoneNumber": "+14155550101"},
    ) in twilio.requests


async def test_purchase_with_nothing_offered_raises_no_numbers_available(twilio, adapter):
    with pytest.raises(NoNumbersAvailable):
        await adapter.purchase_number("907", frozenset())


async def test_import_finds_the_number_in_the_account(twilio, adapter):
    sid = twilio.own("+14155552671")
    imported = await adapter.import_number("+14155552671")
    assert (imported.phone_number, imported.provider_ref) == ("+14155552671", sid)
    with pytest.raises(TelephonyError):
        await adapter.import_number("+14155559999")


async def test_bought_and_imported_numbers_send_their_texts_to_our_sms_webhook(twilio):
    sms_url = "https://switchboard.example.com/webhooks/providers/twilio/sms"
    provider = TwilioTelephony(
        twilio.account_sid, twilio.auth_token, VOICE_URL, base_url=twilio.url, sms_url=sms_url
    )
    twilio.available["415"] = ["+14155550100"]
    imported_sid = twilio.own("+14155552671")
    try:
        bought = await provider.purchase_number("415", frozenset())
        imported = await provider.import_number("+14155552671")
    finally:
        await provider.aclose()
    assert twilio.incoming[bought.provider_ref]["sms_url"] == sms_url
    assert imported.provider_ref == imported_sid
    assert twilio.incoming[imported_sid]["sms_url"] == sms_url


async def test_assign_points_the_voice_url_at_the_agent_and_unassign_clears_it(twilio, adapter):
    sid = twilio.own("+14155552671")
    rule = await adapter.assign_number(held(twilio, "+14155552671", sid), "agent-1")
    url = twilio.incoming[sid]["voice_url"]
    assert url.startswith(VOICE_URL) and parse_qs(urlsplit(url).query) == {"agent_id": ["agent-1"]}
    assert await adapter.unassign_number(held(twilio, "+14155552671", sid, rule=rule)) is True
    assert twilio.incoming[sid]["voice_url"] == ""


async def test_release_of_a_purchased_number_deletes_it(twilio, adapter):
    sid = twilio.own("+14155552671", voice_url=VOICE_URL)
    deleted = await adapter.release_number(held(twilio, "+14155552671", sid, rule="r"))
    assert deleted is True and sid not in twilio.incoming


async def test_release_of_an_imported_number_keeps_it_but_clears_routing(twilio, adapter):
    sid = twilio.own("+14155552671", voice_url=VOICE_URL)
    number = held(twilio, "+14155552671", sid, purchased=False, rule="r")
    assert await adapter.release_number(number) is True
    assert twilio.incoming[sid]["voice_url"] == ""


async def test_release_of_an_unknown_number_raises(twilio, adapter):
    with pytest.raises(TelephonyError):
        await adapter.release_number(held(twilio, "+14155552671", "PN" + "0" * 32))


async def test_call_is_placed_and_its_states_are_mapped(twilio, adapter):
    twilio.own("+14155550123")
    call_sid = await adapter.place_call(
        OutboundCall("call-1", "+14155550123", "+14155552671", "agent-1", "en-US", 600, True)
    )
    placed = twilio.calls[call_sid]
    assert (placed["to"], placed["from"], placed["record"]) == (
        "+14155552671",
        "+14155550123",
        "true",
    )
    assert parse_qs(urlsplit(placed["url"]).query) == {
        "agent_id": ["agent-1"],
        "call_id": ["call-1"],
    }
    states = [await adapter.call_state(call_sid) for _ in range(4)]
    assert [s.status for s in states] == ["ringing", "ringing", "in_progress", "completed"]
    done = states[-1]
    assert done.duration_seconds == 75
    assert done.started_at == datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    assert done.ended_at == datetime(2026, 3, 10, 12, 1, 15, tzinfo=UTC)
    assert done.recording_url.endswith(f"/Recordings/RE{call_sid[2:]}.mp3")


async def test_call_carries_its_stream_parameters_and_asks_for_machine_detection(twilio, adapter):
    twilio.own("+14155550123")
    call_sid = await adapter.place_call(
        OutboundCall(
            "call-1",
            "+14155550123",
            "+14155552671",
            "agent-1",
            "en-US",
            600,
            False,
            {"call_id": "call-1", "sub_account_id": "sub-1", "token": "t"},
            voicemail_detection=True,
        )
    )
    placed = twilio.calls[call_sid]
    assert parse_qs(urlsplit(placed["url"]).query) == {
        "agent_id": ["agent-1"],
        "call_id": ["call-1"],
        "sub_account_id": ["sub-1"],
        "token": ["t"],
    }
    assert placed["machine_detection"] == "DetectMessageEnd"


async def test_transfer_redirects_the_live_call_to_a_dial_of_the_number(twilio, adapter):
    twilio.own("+14155550123")
    call_sid = await adapter.place_call(
        OutboundCall("call-1", "+14155550123", "+14155552671", "agent-1", "en-US", 600, False)
    )
    await adapter.transfer_call(call_sid, "+14155550100")
    assert twilio.redirects == [
        {"sid": call_sid, "Twiml": "<Response><Dial>+14155550100</Dial></Response>"}
    ]
    with pytest.raises(TelephonyError):  # a call Twilio does not know
        await adapter.transfer_call("CA" + "0" * 32, "+14155550100")


async def test_inbound_call_is_not_placed_through_twilio(twilio, adapter):
    with pytest.raises(TelephonyError):
        await adapter.place_call(
            OutboundCall(
                "call-1",
                "+14155552671",
                "+14155550123",
                "agent-1",
                "en-US",
                600,
                False,
                direction="inbound",
            )
        )


def test_signature_is_twilios_documented_algorithm():
    # Twilio's own example (its helper library's request validator test).
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+14158675309",
        "Digits": "1234",
        "From": "+14158675309",
        "To": "+18005551212",
    }
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert signature("12345", url, params.items()) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    assert signature_valid(
        "12345", ["https://elsewhere", url], params.items(), "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    )
    assert not signature_valid(
        "12345", [url], {**params, "Digits": "9"}.items(), "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    )
    assert not signature_valid(None, [url], params.items(), "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
    assert not signature_valid("12345", [url], params.items(), None)


@pytest.mark.parametrize(
    ("caller", "expected"),
    [
        # Twilio's security page's worked example (the issue's +12349013030 gives the second value;
        # GvWf1cFY/Q7PnoempGyD5oXAezc= is the signature for +14158675310, checked here).
        ("+14158675310", "GvWf1cFY/Q7PnoempGyD5oXAezc="),
        ("+12349013030", "0/KCTR6DLpKmkAf8muzZqo1nDgQ="),
    ],
)
def test_signature_matches_twilios_security_page_example(caller, expected):
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": caller,
        "Digits": "1234",
        "From": caller,
        "To": "+18005551212",
    }
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert signature("12345", url, params.items()) == expected
    assert signature_valid("12345", [url], params.items(), expected)
    assert not signature_valid("12345", [url.replace("bar=2", "bar=3")], params.items(), expected)


def test_answered_by_maps_twilios_machine_detection():
    assert [
        answered_by(value)
        for value in (
            "human",
            "machine_end_beep",
            "machine_end_silence",
            "machine_end_other",
            "fax",
            "unknown",
            None,
            "something_new",
        )
    ] == ["human", "machine", "machine", "machine", "machine", "unknown", "unknown", "unknown"]


def test_voice_url_defaults_to_the_runtimes_twiml_route():
    assert default_voice_url("https://voice.example.com/") == (
        "https://voice.example.com/voice/twilio/twiml"
    )
    assert default_voice_url(None) is None


@pytest.mark.parametrize(
    ("outcome", "reason", "error"),
    [
        ("no-answer", "no_answer", "provider_error: nobody answered"),
        ("busy", "busy", "provider_error: the line was busy"),
        ("failed", "failed", "provider_error: call failed"),
    ],
)
async def test_a_call_that_never_connects_is_failed_with_its_reason(
    twilio, adapter, outcome, reason, error
):
    twilio.call_outcome = outcome
    twilio.own("+14155550123")
    call_sid = await adapter.place_call(
        OutboundCall("call-1", "+14155550123", "+14155552671", "agent-1", "en-US", 600, False)
    )
    for _ in range(3):
        await adapter.call_state(call_sid)
    state = await adapter.call_state(call_sid)
    assert state.status == "failed" and state.finished
    assert (state.ended_reason, state.error) == (reason, error)


async def test_wrong_credentials_raise_telephony_error(twilio):
    provider = TwilioTelephony(twilio.account_sid, "wrong", VOICE_URL, base_url=twilio.url)
    try:
        with pytest.raises(TelephonyError, match="401"):
            await provider.import_number("+14155552671")
    finally:
        await provider.aclose()


async def test_unreachable_api_raises_telephony_error():
    from tenancy.embedded import free_port

    provider = TwilioTelephony(
        "AC1", "token", VOICE_URL, base_url=f"http://127.0.0.1:{free_port()}", timeout=2
    )
    try:
        with pytest.raises(TelephonyError, match="unreachable"):
            await provider.import_number("+14155552671")
    finally:
        await provider.aclose()


# --- through the API --------------------------------------------------------------------------


@pytest.fixture
async def twilio_worker(twilio, migrated, servers, monkeypatch):
    """The worker with SWITCHBOARD_TELEPHONY=twilio pointed at the fake server."""
    async with worker_on_twilio(
        twilio, monkeypatch, migrated, servers.redis_url, TWILIO_VOICE_URL=VOICE_URL
    ) as running:
        yield running


async def test_numbers_and_calls_run_through_twilio_when_configured(
    client, pool, agency, twilio, twilio_worker
):
    tenant = await priced_tenant(client, agency, credit=10, call_per_minute=0.5)
    twilio.available["415"] = ["+14155550142"]
    response = await client.post(
        "/webhooks/inbound/phone-numbers/purchase",
        json={"area_code": "415"},
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_json()
    number = (await response.get_json())["phone_number"]
    assert number["phone_number"] == "+14155550142"
    sid = twilio.by_number("+14155550142")["sid"]

    agent_id = await make_agent(client, tenant)
    assert (await assign(client, tenant, number["id"], agent_id)).status_code == 200
    assert agent_id in twilio.incoming[sid]["voice_url"]

    contact_id = await make_contact(client, tenant)
    response = await client.post(
        f"/webhooks/inbound/contacts/{contact_id}/call",
        json={"agent_id": agent_id},
        headers=tenant.headers,
    )
    call_id = (await response.get_json())["call_id"]
    for _ in range(900):
        call = (
            await (
                await client.get(f"/webhooks/inbound/calls/{call_id}", headers=tenant.headers)
            ).get_json()
        )["call"]
        if call["status"] == "completed":
            break
        await asyncio.sleep(0.1)
    assert call["status"] == "completed" and call["duration_seconds"] == 75
    assert call["recording_url"].startswith(twilio.url)
    assert await balance(pool, tenant) == 9.0  # 75 s is two started minutes at 0.50

    response = await client.delete(
        f"/webhooks/inbound/phone-numbers/{number['id']}", headers=tenant.headers
    )
    assert (await response.get_json())["dispatch_rule_deleted"] is True
    assert sid not in twilio.incoming


async def test_twilio_refusal_is_502_and_changes_nothing(
    client, pool, tenant, twilio, twilio_worker
):
    response = await client.post(
        "/webhooks/inbound/phone-numbers/import",
        json={"phone_number": "+14155552671"},
        headers=tenant.headers,
    )
    body = await response.get_json()
    assert response.status_code == 502 and body["error"]["code"] == "provider_error"
    listed = await (
        await client.get("/webhooks/inbound/phone-numbers", headers=tenant.headers)
    ).get_json()
    assert listed["phone_numbers"] == []


async def test_unassign_through_the_api_clears_the_voice_url_and_a_refusal_is_502(
    client, tenant, twilio, twilio_worker
):
    numbers = "/webhooks/inbound/phone-numbers"
    sid = twilio.own("+14155552671")
    response = await client.post(
        f"{numbers}/import", json={"phone_number": "+14155552671"}, headers=tenant.headers
    )
    number_id = (await response.get_json())["phone_number"]["id"]
    agent_id = await make_agent(client, tenant)
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    assert agent_id in twilio.incoming[sid]["voice_url"]

    response = await client.delete(f"{numbers}/{number_id}/agent", headers=tenant.headers)
    assert (await response.get_json())["dispatch_rule_deleted"] is True
    assert twilio.incoming[sid]["voice_url"] == ""

    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    gone = twilio.incoming.pop(sid)  # Twilio no longer knows the number: it answers 404
    response = await client.delete(f"{numbers}/{number_id}/agent", headers=tenant.headers)
    assert response.status_code == 502
    assert (await response.get_json())["error"]["code"] == "provider_error"
    shown = await (await client.get(f"{numbers}/{number_id}", headers=tenant.headers)).get_json()
    assert shown["phone_number"]["agent_id"] == agent_id
    assert agent_id in gone["voice_url"]
