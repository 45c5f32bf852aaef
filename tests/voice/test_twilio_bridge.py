"""The Twilio bridge end to end (CONTRACT 6 "Twilio", "Inbound", 9): a local fake of Twilio
(tests/integrations/fake_twilio.py) fetches the voice runtime's TwiML webhook, signed, and dials
the Media Stream it names, where a sandbox script plays the contact against the agent."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from urllib.parse import parse_qs, urlsplit
from xml.etree import ElementTree

import httpx
import pytest

from integrations.telephony.twilio import SIGNATURE_HEADER, signature
from tenancy.embedded import free_port
from tests.calls.test_calls import wait_for_end
from tests.factories import (
    assign,
    create_plan,
    import_number,
    make_agent,
    make_contact,
    make_tenant,
)
from tests.helpers import tenant_sql, voice_process
from tests.integrations.fake_twilio import FakeTwilio, twilio_app, worker_on_twilio
from tests.receiver import serving

pytestmark = pytest.mark.voice_e2e

AUTH_TOKEN = uuid.uuid4().hex
NUMBER = "+14155550123"
CONTACT = "+14155552671"
CALLER = "+14155550161"
SECOND_CALLER = "+14155550162"
ANSWERING_MACHINE = "+14155550166"
REPLY = "Agent: Great, thank you for your time."
PERSON = [
    "Contact: Hello?",
    REPLY,
    "Contact: Yes, I have a minute.",
    REPLY,
    "Contact: That sounds good.",
    REPLY,
    "Contact: Thank you, goodbye.",
]


@contextlib.contextmanager
def bridge(fake_vendors, tmp_path_factory, **settings):
    """`switchboard voice` knowing Twilio's auth token and its own public address."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("twilio-voice") / "voice.log"
    values = {
        **fake_vendors.env,
        "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
        "SWITCHBOARD_VOICE_PUBLIC_URL": public,
        "SWITCHBOARD_VOICE_URL": f"ws://127.0.0.1:{port}",
        **settings,
    }
    with voice_process(port, values, log):
        yield public


@pytest.fixture(scope="module")
def bridge_url(migrated, fake_vendors, tmp_path_factory):
    with bridge(fake_vendors, tmp_path_factory) as public:
        yield public


@pytest.fixture
async def twilio(fake_vendors):
    fake_vendors.reset()
    state = FakeTwilio(auth_token=AUTH_TOKEN, bridge=True)
    async with serving(twilio_app(state)) as base:
        state.url = base
        yield state
    for task in state.carrying.values():
        task.cancel()


@pytest.fixture
async def twilio_worker(twilio, bridge_url, migrated, servers, monkeypatch):
    """The worker with SWITCHBOARD_TELEPHONY=twilio: TWILIO_VOICE_URL left to its default."""
    async with worker_on_twilio(
        twilio, monkeypatch, migrated, servers.redis_url, SWITCHBOARD_VOICE_PUBLIC_URL=bridge_url
    ) as running:
        yield running


async def twilio_agent(client, twilio, tenant, **overrides):
    """An agent answering NUMBER, a number of the Twilio account."""
    twilio.own(NUMBER)
    agent_id = await make_agent(client, tenant, **overrides)
    number_id = await import_number(client, tenant, NUMBER)
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    return agent_id


async def place(client, tenant, agent_id, phone=CONTACT):
    contact_id = await make_contact(client, tenant, phone=phone)
    response = await client.post(
        f"/webhooks/inbound/contacts/{contact_id}/call",
        json={"agent_id": agent_id},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["call_id"]


async def call_row(pool, tenant, call_id):
    [row] = await tenant_sql(
        pool,
        tenant,
        "SELECT direction, answered_by, ended_reason, provider_call_id FROM calls WHERE id = $1",
        call_id,
    )
    return dict(row)


# --- outbound ---------------------------------------------------------------------------------


async def test_twilio_call_is_a_conversation_through_the_bridge(
    client, pool, tenant, twilio, twilio_worker, bridge_url
):
    agent_id = await twilio_agent(client, twilio, tenant)
    call_id = await place(client, tenant, agent_id)
    call = await wait_for_end(client, tenant, call_id)
    assert call["status"] == "completed", (call, twilio.webhooks)
    assert (call["transcript"] or "").split("\n") == PERSON, call
    row = await call_row(pool, tenant, call_id)
    assert row["direction"] == "outbound" and row["ended_reason"] == "customer_hangup"
    # Without voicemail detection Twilio says nothing of who answered.
    assert row["answered_by"] == "unknown"
    [webhook] = twilio.webhooks
    assert webhook["status"] == 200
    assert webhook["url"].startswith(f"{bridge_url}/voice/twilio/twiml?")
    assert parse_qs(urlsplit(webhook["url"]).query)["call_id"] == [call_id]
    stream = ElementTree.fromstring(webhook["twiml"]).find("./Connect/Stream")
    assert stream.get("url") == bridge_url.replace("http://", "ws://") + "/voice/twilio/stream"
    parameters = {p.get("name"): p.get("value") for p in stream.findall("Parameter")}
    assert parameters["call_id"] == call_id and parameters["sub_account_id"] == str(tenant.id)
    assert parameters["answered_by"] == "unknown" and parameters["token"]
    assert "MachineDetection" not in twilio.calls[row["provider_call_id"]]
    assert not twilio.calls[row["provider_call_id"]]["machine_detection"]


async def test_twilio_answering_machine_is_detected_and_hung_up_on(
    client, pool, tenant, twilio, twilio_worker
):
    agent_id = await twilio_agent(
        client, twilio, tenant, voicemail_detection=True, voicemail_type="hangup"
    )
    call_id = await place(client, tenant, agent_id, phone=ANSWERING_MACHINE)
    call = await wait_for_end(client, tenant, call_id)
    row = await call_row(pool, tenant, call_id)
    assert (call["status"], row["answered_by"], row["ended_reason"]) == (
        "completed",
        "machine",
        "voicemail",
    )
    placed = twilio.calls[row["provider_call_id"]]
    assert placed["machine_detection"] == "DetectMessageEnd"
    assert twilio.webhooks[0]["params"]["AnsweredBy"] == "machine_end_beep"


# --- signatures -------------------------------------------------------------------------------


def webhook_form(**extra):
    return {
        "AccountSid": "AC" + uuid.uuid4().hex,
        "CallSid": "CA" + uuid.uuid4().hex,
        "CallStatus": "ringing",
        "Direction": "inbound",
        "From": CALLER,
        "To": NUMBER,
        **extra,
    }


async def test_twilio_webhook_with_a_forged_signature_is_403_and_starts_nothing(
    client, pool, tenant, twilio, twilio_worker, bridge_url
):
    await twilio_agent(client, twilio, tenant)
    url = twilio.by_number(NUMBER)["voice_url"]
    form = webhook_form()
    async with httpx.AsyncClient() as http:
        for headers in (
            {SIGNATURE_HEADER: signature("not-the-token", url, form.items())},
            {SIGNATURE_HEADER: signature(AUTH_TOKEN, url + "&x=1", form.items())},
            {},
        ):
            response = await http.post(url, data=form, headers=headers)
            assert response.status_code == 403
        # The genuine signature of other parameters does not cover these.
        signed = signature(AUTH_TOKEN, url, webhook_form().items())
        response = await http.post(url, data=form, headers={SIGNATURE_HEADER: signed})
        assert response.status_code == 403
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []
    assert await tenant_sql(pool, tenant, "SELECT id FROM contacts WHERE phone = $1", CALLER) == []


async def test_twilio_outbound_webhook_without_our_token_is_rejected(bridge_url):
    url = (
        f"{bridge_url}/voice/twilio/twiml?call_id={uuid.uuid4()}"
        f"&sub_account_id={uuid.uuid4()}&token=forged"
    )
    form = webhook_form(Direction="outbound-api")
    async with httpx.AsyncClient() as http:
        response = await http.post(
            url, data=form, headers={SIGNATURE_HEADER: signature(AUTH_TOKEN, url, form.items())}
        )
    assert response.status_code == 200
    assert ElementTree.fromstring(response.text).find("Reject") is not None


# --- inbound ----------------------------------------------------------------------------------


async def test_twilio_inbound_call_is_answered_by_the_numbers_agent(
    client, pool, tenant, twilio, twilio_worker
):
    agent_id = await twilio_agent(client, twilio, tenant)
    sid = twilio.ring(CALLER, NUMBER)
    await asyncio.wait_for(twilio.ended(sid), 90)
    [row] = await tenant_sql(pool, tenant, "SELECT id FROM calls WHERE provider_call_id = $1", sid)
    call = await wait_for_end(client, tenant, str(row["id"]))
    assert call["status"] == "completed", (call, twilio.webhooks)
    assert (call["agent_id"], call["from_number"], call["to_number"]) == (agent_id, CALLER, NUMBER)
    assert (call["transcript"] or "").split("\n") == PERSON, call
    assert (await call_row(pool, tenant, row["id"]))["direction"] == "inbound"
    [contact] = await tenant_sql(
        pool, tenant, "SELECT id, lead_source FROM contacts WHERE phone = $1", CALLER
    )
    assert contact["lead_source"] == "inbound_call" and str(contact["id"]) == call["contact_id"]


async def test_twilio_inbound_call_to_an_unassigned_number_is_rejected(
    client, pool, tenant, twilio, twilio_worker, bridge_url
):
    number = f"+1212555{random.randrange(1000, 10000)}"  # held by this sub-account alone
    twilio.own(number, voice_url=f"{bridge_url}/voice/twilio/twiml")
    await import_number(client, tenant, number)
    sid = twilio.ring(CALLER, number)
    assert (await asyncio.wait_for(twilio.ended(sid), 30))["status"] == "failed"
    assert ElementTree.fromstring(twilio.webhooks[0]["twiml"]).find("Reject") is not None
    assert await tenant_sql(pool, tenant, "SELECT id FROM calls") == []


async def held_call(client, pool, tenant, sid):
    [row] = await tenant_sql(pool, tenant, "SELECT id FROM calls WHERE provider_call_id = $1", sid)
    return await wait_for_end(client, tenant, str(row["id"]))


def held(twilio, sid):
    """How many times the caller of `sid` was told to hold (a Pause and a Redirect)."""
    return sum(
        1
        for hook in twilio.webhooks
        if hook["params"]["CallSid"] == sid
        and ElementTree.fromstring(hook["twiml"]).find("Redirect") is not None
    )


async def test_twilio_inbound_calls_beyond_the_plans_limit_hold_then_connect_in_turn(
    client, pool, agency, twilio, twilio_worker
):
    plan = await create_plan(client, agency.headers, name="One line", max_concurrent_calls=1)
    tenant = await make_tenant(client, agency, plan=plan["slug"])
    await two_callers_in_turn(client, pool, tenant, twilio)


async def test_twilio_callers_beyond_the_runtimes_call_limit_hold_then_connect_in_turn(
    client, pool, tenant, twilio, migrated, servers, monkeypatch, fake_vendors, tmp_path_factory
):
    # The plan allows 10 calls; the voice process takes one at a time.
    with bridge(fake_vendors, tmp_path_factory, SWITCHBOARD_VOICE_MAX_CALLS="1") as public:
        async with worker_on_twilio(
            twilio, monkeypatch, migrated, servers.redis_url, SWITCHBOARD_VOICE_PUBLIC_URL=public
        ):
            await two_callers_in_turn(client, pool, tenant, twilio)


async def two_callers_in_turn(client, pool, tenant, twilio):
    await twilio_agent(client, twilio, tenant)
    first = twilio.ring(CALLER, NUMBER)
    await asyncio.sleep(1)
    second = twilio.ring(SECOND_CALLER, NUMBER)
    await asyncio.wait_for(asyncio.gather(twilio.ended(first), twilio.ended(second)), 120)
    calls = [await held_call(client, pool, tenant, sid) for sid in (first, second)]
    assert [call["status"] for call in calls] == ["completed", "completed"], twilio.webhooks
    assert [(call["transcript"] or "").split("\n") for call in calls] == [PERSON, PERSON]
    # The second caller was held while the first talked, and connected once it had ended.
    assert held(twilio, first) == 0 and held(twilio, second) >= 2
    assert calls[1]["started_at"] >= calls[0]["ended_at"]


async def test_a_twilio_caller_who_gives_up_on_hold_is_a_failed_no_answer_call(
    client, pool, agency, twilio, twilio_worker
):
    plan = await create_plan(client, agency.headers, name="One line", max_concurrent_calls=1)
    tenant = await make_tenant(client, agency, plan=plan["slug"])
    await twilio_agent(client, twilio, tenant)
    twilio.hold_patience = 3
    first = twilio.ring(CALLER, NUMBER)
    await asyncio.sleep(1)
    second = twilio.ring(SECOND_CALLER, NUMBER)
    await asyncio.wait_for(twilio.ended(second), 30)
    call = await held_call(client, pool, tenant, second)
    row = await call_row(pool, tenant, call["id"])
    assert call["status"] == "failed" and row["ended_reason"] == "no_answer"
    assert call["error"] == "provider_error: the caller hung up before a line was free"
    assert call["cost"] == 0 and held(twilio, second) >= 1
    await asyncio.wait_for(twilio.ended(first), 90)
    assert (await held_call(client, pool, tenant, first))["status"] == "completed"
