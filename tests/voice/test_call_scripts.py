"""A call end to end, per sandbox script (CONTRACT 6, 9): placed through the API, dialled by the
worker's sandbox carrier over Media Streams, answered by the `switchboard voice` process, spoken
through the fake vendors, and recorded, charged and reported as the contact lived it."""

from __future__ import annotations

import asyncio
import io
import json
import secrets
import uuid
import wave
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from integrations.telephony.sandbox import SandboxTelephony
from tenancy.call_tokens import stream_parameters
from tenancy.settings import get_settings
from tests.calls.test_calls import place, wait_for_end
from tests.factories import BASE, CONTACTS, assign, connect, import_number, make_agent
from tests.helpers import tenant_sql

pytestmark = pytest.mark.voice_e2e

REPLY = "Great, thank you for your time."
PERSON, TALKATIVE, MACHINE, SILENT, NO_ANSWER, BUSY, INTERRUPTING = (
    "+14155552671",
    "+14155550155",
    "+14155550166",
    "+14155550177",
    "+14155550186",
    "+14155550187",
    "+14155550144",
)


async def ready(client: Any, tenant: Any, **agent: Any) -> str:
    """An agent with a number of its own."""
    agent_id = await make_agent(client, tenant, **agent)
    number = f"+1415555{secrets.randbelow(8000) + 2000}"
    number_id = await import_number(client, tenant, number)
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    return agent_id


async def call_through(
    client: Any, tenant: Any, phone: str, agent_id: str | None = None, **agent: Any
) -> dict[str, Any]:
    """The agent (a new one unless given) calls a contact at `phone`: the call once ended."""
    agent_id = agent_id or await ready(client, tenant, **agent)
    # The sub-account's contact at that number (a second call finds the first's contact).
    response = await client.post(
        CONTACTS, json={"name": "Ada Lovelace", "phone": phone}, headers=tenant.headers
    )
    assert response.status_code in (200, 201), await response.get_data(as_text=True)
    contact_id = (await response.get_json())["contact_id"]
    response = await place(client, tenant, contact_id, agent_id)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await wait_for_end(client, tenant, (await response.get_json())["call_id"])


async def stored(pool: Any, tenant: Any, call_id: str) -> dict[str, Any]:
    rows = await tenant_sql(
        pool,
        tenant,
        "SELECT ended_reason, answered_by, messages, error, direction FROM calls WHERE id = $1",
        call_id,
    )
    row = dict(rows[0])
    messages = row["messages"]
    row["messages"] = json.loads(messages) if isinstance(messages, str) else messages
    return row


def said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["text"]) for m in messages]


async def test_person_converses_through_the_agents_own_vendors(
    client, pool, tenant, worker, vendors
) -> None:
    # The turn ends 700 ms into a pause: the contact hangs up 500 ms after its goodbye.
    agent_id = await ready(
        client,
        tenant,
        llm_model="gpt-4o-mini",
        temperature=0.3,
        voice_activity_timeout=700,
        prompt="You sell solar panels. Be brief.",
        voice_id="openai/nova",
        first_message="Hi, this is Sam from Sunny Roofs.",
    )
    key = f"sk-{secrets.token_hex(12)}"
    assert (
        await client.put(
            f"{BASE}/integrations/openai", json={"api_key": key}, headers=tenant.headers
        )
    ).status_code == 200
    call = await call_through(client, tenant, PERSON, agent_id)
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "completed", record
    assert record["ended_reason"] == "customer_hangup" and record["answered_by"] == "human"
    assert record["direction"] == "outbound" and record["error"] is None
    # The contact speaks first; the first message follows, then the model's replies.
    assert said(record["messages"]) == [
        ("contact", "Hello?"),
        ("agent", "Hi, this is Sam from Sunny Roofs."),
        ("contact", "Yes, I have a minute."),
        ("agent", REPLY),
        ("contact", "That sounds good."),
        ("agent", REPLY),
        ("contact", "Thank you, goodbye."),
    ]
    starts = [m["start_seconds"] for m in record["messages"]]
    assert starts == sorted(starts) and starts[0] >= 0
    assert call["transcript"].splitlines()[:2] == [
        "Contact: Hello?",
        "Agent: Hi, this is Sam from Sunny Roofs.",
    ]
    # Every model request carried the agent's model, temperature and prompt, and the
    # sub-account's own key; the voice and transcriber were the agent's.
    # The first message stands in for the first reply; the words said while hanging up are
    # transcribed but not answered.
    chats = vendors.requests_for(vendor="openai", kind="llm")
    assert len(chats) == 2
    for chat in chats:
        assert chat.body["model"] == "gpt-4o-mini" and chat.body["temperature"] == 0.3
        # The prompt, then the language to speak (the agent's en-US).
        assert chat.body["messages"][0] == {
            "role": "system",
            "content": "You sell solar panels. Be brief.\n\nSpeak English (en-US).",
        }
        assert chat.headers["authorization"] == f"Bearer {key}"
        assert any(tool["function"]["name"] == "end_call" for tool in chat.body["tools"])
    speech = vendors.requests_for(vendor="openai", kind="tts")
    assert {r.body["voice"] for r in speech} == {"nova"}
    assert {r.answer for r in speech} >= {"Hi, this is Sam from Sunny Roofs.", REPLY}
    heard = vendors.requests_for(vendor="openai", kind="stt")
    assert [r.answer for r in heard] == [
        "Hello?",
        "Yes, I have a minute.",
        "That sounds good.",
        "Thank you, goodbye.",
    ]
    assert {r.body["language"] for r in heard} == {"en"}


async def test_the_model_ending_the_call_is_agent_hangup(
    client, pool, tenant, worker, vendors
) -> None:
    # The contact hangs up half a second after its goodbye: a short turn end lets the model
    # hang up first.
    call = await call_through(
        client,
        tenant,
        TALKATIVE,
        voice_activity_timeout=100,
        prompt="[fake:end_call_on_goodbye] End the call on goodbye.",
    )
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "completed"
    assert record["ended_reason"] == "agent_hangup"
    # The model was asked once per turn; its last answer was the tool call, and nothing after.
    answers = [r.answer for r in vendors.requests_for(vendor="openai", kind="llm")]
    assert answers[-1].startswith("end_call") and answers[:-1] == [REPLY] * (len(answers) - 1)


async def test_silent_contact_hears_the_opening_and_a_follow_up_then_silence_ends_it(
    client, pool, tenant, worker, vendors
) -> None:
    call = await call_through(
        client, tenant, SILENT, silence_timeout=1, first_message="Hello, this is Sam."
    )
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "completed" and record["ended_reason"] == "silence_timeout"
    assert said(record["messages"]) == [
        ("agent", "Hello, this is Sam."),
        ("agent", "Are you still there?"),
    ]
    assert not vendors.requests_for(kind="stt")


async def test_answering_machine_gets_the_voicemail_message_after_the_beep(
    client, pool, tenant, worker, vendors
) -> None:
    call = await call_through(
        client,
        tenant,
        MACHINE,
        voicemail_detection=True,
        voicemail_type="leave_message",
        voicemail_message="Please call Sunny Roofs back.",
    )
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "completed" and record["ended_reason"] == "voicemail"
    assert record["answered_by"] == "machine"
    assert said(record["messages"]) == [("agent", "Please call Sunny Roofs back.")]
    # The greeting and beep last about 4.4 s: the message is left after them.
    assert record["messages"][0]["start_seconds"] > 4.4
    assert not vendors.requests_for(kind="llm")


async def test_answering_machine_with_hangup_ends_at_once(
    client, pool, tenant, worker, vendors
) -> None:
    call = await call_through(
        client, tenant, MACHINE, voicemail_detection=True, voicemail_type="hangup"
    )
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "completed" and record["ended_reason"] == "voicemail"
    assert record["messages"] == [] and call["transcript"] is None
    assert not vendors.requests


async def test_machine_without_voicemail_detection_is_talked_to(
    client, pool, tenant, worker, vendors
) -> None:
    call = await call_through(client, tenant, MACHINE, silence_timeout=1)
    record = await stored(pool, tenant, call["id"])
    # The agent talks to the greeting as to a person (its reply may be cut by the beep).
    assert record["answered_by"] == "machine" and record["ended_reason"] == "silence_timeout"
    assert said(record["messages"])[0] == (
        "contact",
        "Hi, you have reached Sam. Please leave a message after the tone.",
    )
    assert any(role == "agent" for role, _ in said(record["messages"]))


async def test_no_answer_and_busy_fail_without_a_conversation_and_report_it(
    client, pool, tenant, worker, vendors, receiver
) -> None:
    agent_id = await ready(client, tenant, webhook=True, webhook_url=receiver.url())
    unanswered = await call_through(client, tenant, NO_ANSWER, agent_id)
    busy = await call_through(client, tenant, BUSY, agent_id)
    for call, reason in ((unanswered, "no_answer"), (busy, "busy")):
        record = await stored(pool, tenant, call["id"])
        assert call["status"] == "failed" and record["ended_reason"] == reason
        assert record["answered_by"] is None and record["messages"] == []
        assert record["error"].startswith("provider_error: ")
    assert not vendors.requests
    for _ in range(300):
        if len(receiver.to("/hook")) >= 2:
            break
        await asyncio.sleep(0.1)
    payloads = [request.json() for request in receiver.to("/hook")]
    assert sorted(p["data"]["call"]["id"] for p in payloads) == sorted(
        [unanswered["id"], busy["id"]]
    )
    assert {p["type"] for p in payloads} == {"call.failed"}


async def test_max_duration_ends_a_long_call(client, pool, tenant, worker, vendors) -> None:
    call = await call_through(client, tenant, TALKATIVE, max_duration=0.1)
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "completed" and record["ended_reason"] == "max_duration"
    assert 5 <= call["duration_seconds"] <= 8


async def test_a_vendor_that_fails_ends_the_call_failed_with_the_reason(
    client, pool, tenant, worker, vendors
) -> None:
    vendors.configure(failures={"openai.llm": 401})
    call = await call_through(client, tenant, PERSON)
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "failed" and record["ended_reason"] == "failed"
    assert record["error"].startswith("llm_error")


async def test_a_vendor_that_hangs_ends_the_call_failed_instead_of_holding_it(
    client, pool, tenant, worker, vendors
) -> None:
    # The model never answers: the call is not held open until max_duration (5 minutes).
    vendors.configure(failures={"openai.llm": "hang"})
    call = await call_through(client, tenant, PERSON, max_duration=5)
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "failed" and record["ended_reason"] == "failed", record
    assert record["error"].startswith("llm_error"), record["error"]
    assert call["duration_seconds"] < 60


async def test_the_contact_cutting_in_stops_the_agent_at_once(
    client, pool, tenant, worker, vendors
) -> None:
    """Barge-in: the contact speaks over a long first message; the runtime clears what the line
    has not played yet and the agent's voice stops, then the conversation goes on."""
    opening = (
        "Hi, this is Sam from Sunny Roofs, calling about the solar panel quote you asked "
        "for last week on our website."
    )  # about six seconds of speech
    agent_id = await ready(client, tenant, first_message=opening, voice_activity_timeout=700)
    call = await call_through(client, tenant, INTERRUPTING, agent_id)
    rows = await tenant_sql(
        pool, tenant, "SELECT provider_call_id FROM calls WHERE id = $1", call["id"]
    )
    lived = SandboxTelephony.line_log(rows[0]["provider_call_id"])
    assert lived is not None
    hello, cut_in = lived.lines[:2]
    assert (hello.text, cut_in.text) == ("Hello?", "Yes, I have a minute.")
    opening_start, opening_end = lived.agent_utterances[0]
    # The contact cut in a second into the opening ...
    assert cut_in.start_seconds - opening_start == pytest.approx(1.0, abs=0.1)
    # ... the runtime cleared the line as soon as it heard speech, and the opening stopped there
    # instead of playing its six seconds.
    cleared = [at for at in lived.clear_seconds if at > cut_in.start_seconds]
    assert cleared and cleared[0] - cut_in.start_seconds < 0.8, lived.clear_seconds
    assert opening_end <= cleared[0] + 0.02
    assert opening_end - opening_start < 2.0
    # The agent answered what the contact said, and the call went on to its goodbye.
    record = await stored(pool, tenant, call["id"])
    assert call["status"] == "completed" and record["ended_reason"] == "customer_hangup"
    contact_lines = [text for role, text in said(record["messages"]) if role == "contact"]
    assert contact_lines == [
        "Hello?",
        "Yes, I have a minute.",
        "That sounds good.",
        "Thank you, goodbye.",
    ]


async def voice_metrics(voice_runtime: Any) -> dict[str, float]:
    """The runtime's /metrics samples, by name and labels."""
    url = voice_runtime.url.replace("ws://", "http://") + "/metrics"
    async with httpx.AsyncClient(timeout=5) as http:
        page = (await http.get(url)).text
    return {
        f"{sample.name}{sorted(sample.labels.items())}": sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }


async def test_the_runtime_counts_calls_and_times_each_response_at_its_metrics(
    client, pool, tenant, worker, vendors, voice_runtime
) -> None:
    before = await voice_metrics(voice_runtime)
    vendors.configure(llm_first_token_ms=200)
    call = await call_through(client, tenant, PERSON)
    assert call["status"] == "completed"
    after = await voice_metrics(voice_runtime)

    def grew(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    assert grew("switchboard_voice_calls_total[('ended_reason', 'customer_hangup')]") == 1
    # Three responses (to "Hello?", "Yes, I have a minute." and "That sounds good."), each
    # after the model's 200 ms and within the second.
    assert grew("switchboard_voice_response_seconds_count[]") == 3
    assert grew("switchboard_voice_response_seconds_bucket[('le', '0.1')]") == 0
    assert grew("switchboard_voice_response_seconds_bucket[('le', '1.0')]") == 3
    assert after["switchboard_voice_calls_active[]"] == 0


# --- each agent field's effect (CONTRACT 6) ------------------------------------------------------


async def test_voice_activity_timeout_decides_whether_a_pause_ends_the_turn(
    client, pool, tenant, worker, vendors
) -> None:
    # The talkative contact pauses 300 ms inside each sentence. The call is cut at 12 s: its
    # "Hello?" and its first sentence (from about 4.6 s).
    async def transcriptions(pause_ms: int) -> int:
        vendors.reset()
        await call_through(
            client,
            tenant,
            TALKATIVE,
            voice_activity_timeout=pause_ms,
            backcchanneling=False,
            max_duration=0.2,
        )
        return len(vendors.requests_for(kind="stt"))

    # 100 ms: the pause ends the turn, the sentence is transcribed in two halves.
    assert await transcriptions(100) >= 3
    # 700 ms: the pause is part of the turn, transcribed once.
    assert await transcriptions(700) == 2


async def test_backchanneling_acknowledges_a_long_turn_without_answering_it(
    client, pool, tenant, worker, vendors
) -> None:
    async def spoken(backchanneling: bool) -> list[str]:
        vendors.reset()
        await call_through(
            client,
            tenant,
            TALKATIVE,
            backcchanneling=backchanneling,
            voice_activity_timeout=700,
            max_duration=0.2,
        )
        return [r.answer for r in vendors.requests_for(kind="tts")]

    with_it = await spoken(True)
    assert any(text in ("Mm-hmm.", "I see.", "Right.") for text in with_it)
    assert not any(text in ("Mm-hmm.", "I see.", "Right.") for text in await spoken(False))


async def test_background_ambience_is_under_the_agents_side_of_the_recording(
    client, pool, tenant, worker, vendors
) -> None:
    async def first_second(background: dict[str, Any]) -> float:
        call = await call_through(client, tenant, SILENT, silence_timeout=1, **background)
        link = urlsplit(call["recording_url"])
        response = await client.get(f"{link.path}?{link.query}")
        with wave.open(io.BytesIO(await response.get_data())) as wav:
            frames = wav.readframes(int(wav.getframerate() * 0.8))
        samples = np.frombuffer(frames, dtype="<i2").astype(np.float64)
        return float(np.sqrt(np.mean(samples * samples)))

    # Before the agent's first words (after a second of silence), only the bed is heard.
    assert await first_second({"background_noise": True, "background_type": "cafe"}) > 100
    assert await first_second({"background_noise": False}) < 5


async def test_anthropic_deepgram_and_elevenlabs_are_asked_in_their_own_formats(
    client, pool, tenant, worker, vendors
) -> None:
    for provider in ("anthropic", "deepgram", "elevenlabs"):
        await connect(client, tenant, provider)
    call = await call_through(
        client,
        tenant,
        PERSON,
        llm_model="claude-3.5-haiku",
        transcriber="deepgram",
        voice_id="elevenlabs/EXAVITQu4vr4xnSDxMaL",
        temperature=0.2,
        prompt="Be brief.",
    )
    assert call["status"] == "completed"
    chats = vendors.requests_for(vendor="anthropic", kind="llm")
    assert chats and {c.body["model"] for c in chats} == {"claude-3-5-haiku-latest"}
    assert {c.body["temperature"] for c in chats} == {0.2}
    assert all("Be brief." in str(c.body["system"]) for c in chats)
    assert [r.answer for r in vendors.requests_for(vendor="deepgram", kind="stt")][:2] == [
        "Hello?",
        "Yes, I have a minute.",
    ]
    voices = vendors.requests_for(vendor="elevenlabs", kind="tts")
    assert voices and all("EXAVITQu4vr4xnSDxMaL" in r.path for r in voices)
    assert not vendors.requests_for(vendor="openai")


async def test_the_voice_process_logs_no_secret(
    client, pool, tenant, worker, vendors, voice_runtime
) -> None:
    """The runtime's whole output over a call that succeeds and one whose vendor refuses the
    key: no vendor key, call token, pepper or secrets key in it (CONTRACT 9)."""
    agent_id = await ready(client, tenant)
    key = f"sk-{secrets.token_hex(16)}"
    assert (
        await client.put(
            f"{BASE}/integrations/openai", json={"api_key": key}, headers=tenant.headers
        )
    ).status_code == 200
    first = await call_through(client, tenant, PERSON, agent_id)
    vendors.configure(failures={"openai.llm": 401})
    second = await call_through(client, tenant, PERSON, agent_id)
    assert (first["status"], second["status"]) == ("completed", "failed")
    settings = get_settings()
    tokens = {
        stream_parameters(settings, tenant.id, uuid.UUID(call["id"]))["token"]
        for call in (first, second)
    }
    output = voice_runtime.log.read_text(errors="replace")
    assert "Pipecat" in output or "Running on" in output, "expected the runtime's own output"
    values = {key, settings.key_pepper, *(settings.secrets_key or "").split(","), *tokens}
    assert not sorted(value for value in values if value and value in output)
