"""Each vendor a call may use is asked in its own API's form and in the agent's language (CONTRACT
6, 9): a whole sandbox call per LLM vendor, through the fake vendors, and what each was asked.
The person contact's call is cut at 6 s (max_duration 0.1): its "Hello?" is transcribed, answered
by the model and spoken."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.factories import connect
from tests.voice.test_call_scripts import PERSON, call_through

pytestmark = pytest.mark.voice_e2e

CARTESIA_VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
ELEVENLABS_VOICE = "EXAVITQu4vr4xnSDxMaL"


async def call_with(
    client: Any, tenant: Any, vendors: Any, *providers: str, **agent: Any
) -> dict[str, Any]:
    for provider in providers:
        await connect(client, tenant, provider)
    call = await call_through(client, tenant, PERSON, max_duration=0.1, **agent)
    assert not [r for r in vendors.requests if r.status != 200], vendors.requests
    return call


def asked(vendors: Any, vendor: str, kind: str) -> list[Any]:
    requests = vendors.requests_for(vendor=vendor, kind=kind)
    assert requests, f"{vendor} was never asked for {kind}"
    return requests


async def test_google_model_cartesia_voice_and_deepgram_transcription_in_german(
    client, pool, tenant, worker, vendors
) -> None:
    await call_with(
        client,
        tenant,
        vendors,
        "google",
        "cartesia",
        "deepgram",
        llm_model="gemini-2.5-flash",
        voice_id=f"cartesia/{CARTESIA_VOICE}",
        transcriber="deepgram",
        language="de-DE",
        temperature=0.4,
        prompt="Du verkaufst Solaranlagen.",
    )
    for chat in asked(vendors, "google", "llm"):
        assert chat.path.endswith("/models/gemini-2.5-flash:streamGenerateContent"), chat.path
        instruction = json.dumps(chat.body["systemInstruction"], ensure_ascii=False)
        assert "Du verkaufst Solaranlagen." in instruction
        assert "Speak German (de-DE)." in instruction
        assert chat.body["generationConfig"]["temperature"] == 0.4
    for speech in asked(vendors, "cartesia", "tts"):
        assert speech.body["voice"] == {"mode": "id", "id": CARTESIA_VOICE}
        assert speech.body["language"] == "de"
    for heard in asked(vendors, "deepgram", "stt"):
        assert (heard.query["model"], heard.query["language"]) == ("nova-3", "de")
    assert not vendors.requests_for(vendor="openai")


async def test_deepseek_model_deepgram_voice_and_openai_transcription_in_british_english(
    client, pool, tenant, worker, vendors
) -> None:
    await call_with(
        client,
        tenant,
        vendors,
        "deepseek",
        "deepgram",
        llm_model="deepseek-chat",
        voice_id="deepgram/aura-2-draco-en",
        transcriber="openai",
        language="en-GB",
    )
    for chat in asked(vendors, "deepseek", "llm"):
        assert chat.body["model"] == "deepseek-chat"
        assert chat.body["messages"][0] == {"role": "system", "content": "Speak English (en-GB)."}
    # Aura takes no language: the voice's model names it.
    for speech in asked(vendors, "deepgram", "tts"):
        assert speech.query["model"] == "aura-2-draco-en"
        assert "language" not in speech.query
    assert {r.body["language"] for r in asked(vendors, "openai", "stt")} == {"en"}
    assert not vendors.requests_for(vendor="openai", kind="llm")


async def test_grok_model_elevenlabs_voice_and_deepgram_regional_transcription(
    client, pool, tenant, worker, vendors
) -> None:
    await call_with(
        client,
        tenant,
        vendors,
        "grok",
        "elevenlabs",
        "deepgram",
        llm_model="grok-3-mini",
        voice_id=f"elevenlabs/{ELEVENLABS_VOICE}",
        transcriber="deepgram",
        language="pt-BR",
    )
    for chat in asked(vendors, "grok", "llm"):
        assert chat.body["model"] == "grok-3-mini"
        assert chat.body["messages"][0]["content"].endswith("Speak Portuguese (pt-BR).")
    for speech in asked(vendors, "elevenlabs", "tts"):
        assert ELEVENLABS_VOICE in speech.path
        assert speech.body["language_code"] == "pt"
    # nova-3 lists pt-BR itself.
    assert {r.query["language"] for r in asked(vendors, "deepgram", "stt")} == {"pt-BR"}
    assert not vendors.requests_for(vendor="openai")
