"""The fake vendors, driven by the vendors' own SDKs and by Pipecat's services, as the voice
runtime will drive them: replies, audio, transcripts, recording, latency and failures."""

from __future__ import annotations

import io
import json
import time
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import httpx
import numpy as np
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.audio.resamplers.soxr_resampler import SOXRAudioResampler
from pipecat.audio.utils import pcm_to_ulaw, ulaw_to_pcm
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import (
    InputAudioRawFrame,
    LLMContextFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.services.cartesia.tts import CartesiaHttpTTSService
from pipecat.services.deepgram.tts import DeepgramHttpTTSService
from pipecat.services.elevenlabs.tts import ElevenLabsHttpTTSService
from pipecat.services.google.llm import GoogleLLMService
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.openai.stt import OpenAISTTService
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.tests.utils import SleepFrame, run_test

from voice.fake_vendors import FakeVendors, base_urls, env_for, llm
from voice.fake_vendors.audio import Samples

KEY = "sk-sub-account-key"
RATE = 16000
END_CALL_TOOL = {
    "type": "function",
    "function": {
        "name": "end_call",
        "description": "Hang up.",
        "parameters": {
            "type": "object",
            "properties": {"reason": {"type": "string"}},
            "required": ["reason"],
        },
    },
}
GOODBYE_PROMPT = "You are a receptionist. [fake:end_call_on_goodbye]"


# --- the test phrase catalogue: clips with distinct envelopes, made here ----------------------


def _burst(seconds: float, pitch: float, rate: int) -> Samples:
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * k * pitch * t) / k for k in range(1, 8))
    return np.asarray(tone * np.hanning(len(t)), dtype=np.float64)


def _clip(pattern: list[tuple[float, float]], rate: int) -> Samples:
    """(burst seconds, gap seconds) pairs, with 200 ms of silence at each end."""
    parts = [np.zeros(int(0.2 * rate))]
    for i, (burst, gap) in enumerate(pattern):
        parts += [_burst(burst, 110 + 20 * i, rate), np.zeros(int(gap * rate))]
    parts.append(np.zeros(int(0.2 * rate)))
    x = np.concatenate(parts)
    return np.asarray(0.5 * x / np.abs(x).max(), dtype=np.float64)


CLIPS = {
    "hello": ("Hello?", [(0.25, 0.08), (0.45, 0.0)], 8000),
    "yes": ("Yes, that works for me.", [(0.5, 0.3), (0.2, 0.1), (0.2, 0.1), (0.6, 0.0)], 16000),
    "goodbye": ("Goodbye.", [(0.6, 0.15), (0.2, 0.1), (0.2, 0.0)], 16000),
    "busy": (
        "I'm busy right now, call me later.",
        [(0.2, 0.1), (0.3, 0.25), (0.2, 0.1), (0.5, 0.4), (0.3, 0.1), (0.25, 0.0)],
        8000,
    ),
    "repeat": ("Could you repeat that?", [(0.9, 0.2), (0.2, 0.05), (0.3, 0.3), (0.4, 0.0)], 16000),
}


def _wav(samples: Samples, rate: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


def _read_wav(data: bytes) -> tuple[Samples, int]:
    with wave.open(io.BytesIO(data), "rb") as w:
        frames = w.readframes(w.getnframes())
        return np.frombuffer(frames, "<i2").astype(np.float64) / 32768, w.getframerate()


@pytest.fixture(scope="module")
def phrases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("phrases")
    manifest = []
    for name, (text, pattern, rate) in CLIPS.items():
        (directory / f"{name}.wav").write_bytes(_wav(_clip(pattern, rate), rate))
        manifest.append({"name": name, "file": f"{name}.wav", "text": text})
    (directory / "manifest.json").write_text(json.dumps({"clips": manifest}))
    return directory


@pytest.fixture
async def fake(phrases: Path) -> AsyncIterator[FakeVendors]:
    vendors = FakeVendors(phrases)
    await vendors.start()
    yield vendors
    await vendors.stop()


def _openai(fake: FakeVendors, vendor: str = "openai") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=KEY, base_url=fake.base_urls[vendor], max_retries=0)


def _anthropic(fake: FakeVendors) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=KEY, base_url=fake.base_urls["anthropic"], max_retries=0
    )


def _google(fake: FakeVendors) -> genai.Client:
    return genai.Client(api_key=KEY, http_options={"base_url": fake.base_urls["google"]})


async def _openai_reply(
    client: openai.AsyncOpenAI, messages: list[Any], **kwargs: Any
) -> tuple[str, list[Any]]:
    stream = await client.chat.completions.create(
        model="gpt-4.1", messages=messages, stream=True, **kwargs
    )
    text, calls = "", []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.choices and chunk.choices[0].delta.tool_calls:
            calls += chunk.choices[0].delta.tool_calls
    return text, calls


# --- mounts --------------------------------------------------------------------------------


def test_every_vendor_base_url_is_on_the_one_origin() -> None:
    urls = base_urls("http://127.0.0.1:9999")
    env = env_for("http://127.0.0.1:9999")

    assert urls["openai"] == "http://127.0.0.1:9999/openai/v1"
    assert urls["anthropic"] == "http://127.0.0.1:9999/anthropic"
    assert env["SWITCHBOARD_GOOGLE_BASE_URL"] == "http://127.0.0.1:9999/google"
    assert set(env) == {
        f"SWITCHBOARD_{v}_BASE_URL"
        for v in (
            "OPENAI",
            "ANTHROPIC",
            "GOOGLE",
            "DEEPSEEK",
            "GROK",
            "DEEPGRAM",
            "ELEVENLABS",
            "CARTESIA",
        )
    }


# --- LLMs through their SDKs ------------------------------------------------------------------


@pytest.mark.parametrize("vendor", ["openai", "deepseek", "grok"])
async def test_openai_compatible_stream_replies_and_records_the_request(
    fake: FakeVendors, vendor: str
) -> None:
    text, calls = await _openai_reply(
        _openai(fake, vendor),
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}],
        temperature=0.3,
        stream_options={"include_usage": True},
    )

    assert (text, calls) == ("Great, thank you for your time.", [])
    [seen] = fake.requests
    assert (seen.vendor, seen.kind, seen.body["model"]) == (vendor, "llm", "gpt-4.1")
    assert seen.body["temperature"] == 0.3
    assert seen.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert seen.headers["authorization"] == f"Bearer {KEY}"


async def test_openai_goodbye_with_the_marker_calls_end_call(fake: FakeVendors) -> None:
    text, calls = await _openai_reply(
        _openai(fake),
        [
            {"role": "system", "content": GOODBYE_PROMPT},
            {"role": "user", "content": "OK, goodbye!"},
        ],
        tools=[END_CALL_TOOL],
    )

    assert text == ""
    assert calls[0].function.name == "end_call"
    assert json.loads("".join(c.function.arguments or "" for c in calls)) == {"reason": "goodbye"}


async def test_openai_goodbye_without_the_tool_offered_is_a_plain_reply(fake: FakeVendors) -> None:
    text, calls = await _openai_reply(
        _openai(fake),
        [{"role": "system", "content": GOODBYE_PROMPT}, {"role": "user", "content": "goodbye"}],
    )

    assert (text, calls) == ("Great, thank you for your time.", [])


async def test_openai_reply_marker_and_silence(fake: FakeVendors) -> None:
    system = {"role": "system", "content": "[fake:reply=Your table is booked for 8 pm.]"}
    client = _openai(fake)

    booked, _ = await _openai_reply(client, [system, {"role": "user", "content": "Book it"}])
    silent, _ = await _openai_reply(client, [system, {"role": "user", "content": ""}])
    idle, _ = await _openai_reply(
        client,
        [
            system,
            {"role": "user", "content": "Book it"},
            {"role": "system", "content": "The user has been quiet."},
        ],
    )

    assert booked == "Your table is booked for 8 pm."
    assert silent == idle == "Are you still there?"


async def test_openai_non_streaming_completion(fake: FakeVendors) -> None:
    completion = await _openai(fake).chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "Hello"}]
    )

    assert completion.choices[0].message.content == "Great, thank you for your time."
    assert completion.model == "gpt-4.1-mini"


# --- tool results: the booking a demo call shows ------------------------------------------------

BOOKING_PROMPT = (
    "You book. [fake:call=check_availability on=minute] [fake:call=book_appointment on=good]"
)
SLOTS = {
    "slots": [
        {"start": "2026-12-01T17:00:00Z", "start_local": "2026-12-01T09:00:00-08:00"},
        {"start": "2026-12-01T17:30:00Z", "start_local": "2026-12-01T09:30:00-08:00"},
    ]
}
BOOKED = {"appointment_id": "a1", "start": "2026-12-01T17:00:00Z", "end": "2026-12-01T17:30:00Z"}
CALENDAR_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": "Calendar work.",
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }
    for name, properties, required in (
        ("check_availability", {"date": {"type": "string"}}, []),
        ("book_appointment", {"start": {"type": "string"}}, ["start"]),
    )
]


def _openai_turn(name: str, arguments: dict[str, Any], result: Any, n: int) -> list[Any]:
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": json.dumps(result)},
    ]


async def test_openai_slots_are_read_out_and_the_first_is_booked_on_the_next_turn(
    fake: FakeVendors,
) -> None:
    client = _openai(fake)
    system = {"role": "system", "content": BOOKING_PROMPT}
    asked = [system, {"role": "user", "content": "Yes, I have a minute."}]
    checked = [*asked, *_openai_turn("check_availability", {}, SLOTS, 1)]
    agreed = [
        *checked,
        {"role": "assistant", "content": "The first free time is ..."},
        {"role": "user", "content": "That sounds good."},
    ]

    _, check = await _openai_reply(client, asked, tools=CALENDAR_TOOLS)
    offer, _ = await _openai_reply(client, checked, tools=CALENDAR_TOOLS)
    _, book = await _openai_reply(client, agreed, tools=CALENDAR_TOOLS)
    booked = [
        *agreed,
        *_openai_turn("book_appointment", {"start": SLOTS["slots"][0]["start"]}, BOOKED, 2),
    ]
    confirmed, _ = await _openai_reply(client, booked, tools=CALENDAR_TOOLS)

    assert [c.function.name for c in check if c.function.name] == ["check_availability"]
    assert offer == "The first free time is Tuesday 1 December at 09:00. Shall I book it?"
    assert [c.function.name for c in book if c.function.name] == ["book_appointment"]
    arguments = "".join(c.function.arguments or "" for c in book)
    assert json.loads(arguments) == {"start": "2026-12-01T17:00:00Z"}
    assert confirmed == "You are booked for Tuesday 1 December at 09:00."


def _anthropic_turn(name: str, result: Any, tool_id: str) -> list[Any]:
    use = {"type": "tool_use", "id": tool_id, "name": name}
    answer = {"type": "tool_result", "tool_use_id": tool_id, "content": json.dumps(result)}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}]


def test_anthropic_and_gemini_tool_results_are_read_out_errors_included() -> None:
    taken = {"error": "slot_unavailable"}
    anthropic_body = {
        "system": BOOKING_PROMPT,
        "messages": [
            {"role": "user", "content": "Yes, I have a minute."},
            *_anthropic_turn("check_availability", SLOTS, "t1"),
            {"role": "user", "content": "That sounds good."},
            *_anthropic_turn("book_appointment", taken, "t2"),
        ],
    }
    gemini_body = {
        "systemInstruction": {"parts": [{"text": BOOKING_PROMPT}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Yes, I have a minute."}]},
            {"role": "model", "parts": [{"functionCall": {"name": "check_availability"}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "check_availability", "response": SLOTS}}],
            },
            {"role": "user", "parts": [{"text": "What does the order say?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "lookup"}}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "lookup", "response": {"value": "shipped"}}}
                ],
            },
        ],
    }

    assert llm.reply_to(llm.from_anthropic(anthropic_body)).text == (
        "Sorry, that did not work: slot_unavailable."
    )
    assert llm.reply_to(llm.from_google(gemini_body)).text == "Done: shipped."


async def test_anthropic_stream_text_and_records_system_and_key(fake: FakeVendors) -> None:
    # As Pipecat asks: the beta client, streamed, temperature through extra_body.
    stream = await _anthropic(fake).beta.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=200,
        system="[fake:reply=Hello from Claude.]",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        betas=["interleaved-thinking-2025-05-14"],
        extra_body={"temperature": 0.2},
    )
    text = ""
    async for event in stream:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text += event.delta.text

    assert text == "Hello from Claude."
    [seen] = fake.requests
    assert seen.headers["x-api-key"] == KEY
    assert (seen.body["system"], seen.body["temperature"]) == (
        "[fake:reply=Hello from Claude.]",
        0.2,
    )


async def test_anthropic_goodbye_calls_end_call_streamed_and_not(fake: FakeVendors) -> None:
    tool = {
        "name": "end_call",
        "description": "Hang up.",
        "input_schema": {"type": "object", "properties": {}},
    }
    request: dict[str, Any] = dict(
        model="claude-sonnet-4-5",
        max_tokens=200,
        system=GOODBYE_PROMPT,
        tools=[tool],
        messages=[{"role": "user", "content": [{"type": "text", "text": "Goodbye then"}]}],
    )
    client = _anthropic(fake)

    async with client.messages.stream(**request) as stream:
        streamed = await stream.get_final_message()
    whole = await client.messages.create(**request)

    for message in (streamed, whole):
        assert message.stop_reason == "tool_use"
        assert [(b.type, getattr(b, "name", None)) for b in message.content] == [
            ("tool_use", "end_call")
        ]


async def test_google_stream_text_and_function_call(fake: FakeVendors) -> None:
    client = _google(fake)
    end_call = genai.types.FunctionDeclaration(name="end_call", description="Hang up.")
    config = genai.types.GenerateContentConfig(
        system_instruction=GOODBYE_PROMPT,
        temperature=0.4,
        tools=[genai.types.Tool(function_declarations=[end_call])],
    )

    text = ""
    async for chunk in await client.aio.models.generate_content_stream(
        model="gemini-2.5-flash", contents="Hello", config=config
    ):
        text += chunk.text or ""
    ending = await client.aio.models.generate_content(
        model="gemini-2.5-flash", contents="goodbye", config=config
    )

    assert text == "Great, thank you for your time."
    assert ending.function_calls and ending.function_calls[0].name == "end_call"
    first = fake.requests[0]
    assert first.headers["x-goog-api-key"] == KEY
    assert first.body["generationConfig"]["temperature"] == 0.4
    assert GOODBYE_PROMPT in json.dumps(first.body["systemInstruction"])


# --- speech through the SDKs ---------------------------------------------------------------


async def test_openai_speech_is_24khz_pcm_55ms_per_character_and_deterministic(
    fake: FakeVendors,
) -> None:
    client = _openai(fake)
    text = "Thanks for calling Switchboard."

    async def speak() -> bytes:
        return (
            await client.audio.speech.create(
                model="gpt-4o-mini-tts", voice="alloy", input=text, response_format="pcm"
            )
        ).content

    first, second = await speak(), await speak()
    wav = (
        await client.audio.speech.create(
            model="gpt-4o-mini-tts", voice="alloy", input="Hi", response_format="wav"
        )
    ).content

    assert first == second
    assert len(first) / 2 / 24000 == pytest.approx(0.055 * len(text), abs=0.001)
    samples = np.frombuffer(first, "<i2") / 32768
    assert -17 < 20 * np.log10(np.sqrt(np.mean(samples**2))) < -11
    assert _read_wav(wav)[1] == 24000
    assert len(_read_wav(wav)[0]) == pytest.approx(0.2 * 24000, abs=1)


@pytest.mark.parametrize("text", ["Hi.", "Are you still there?", "Could you repeat that?"])
async def test_synthesised_speech_is_speech_to_silero(fake: FakeVendors, text: str) -> None:
    pcm = (
        await _openai(fake).audio.speech.create(
            model="tts-1", voice="alloy", input=text, response_format="pcm"
        )
    ).content
    resampler = SOXRAudioResampler()
    telephone = await ulaw_to_pcm(
        await pcm_to_ulaw(pcm, 24000, 8000, resampler), 8000, RATE, resampler
    )
    vad = SileroVADAnalyzer(sample_rate=RATE)
    vad.set_sample_rate(RATE)
    size = vad.num_frames_required() * 2

    confidences = [
        float(np.ravel(vad.voice_confidence(telephone[i : i + size]))[0])
        for i in range(0, len(telephone) - size, size)
    ]

    assert np.mean(np.array(confidences) > 0.5) > 0.75


async def test_openai_transcription_names_the_phrase_played(
    fake: FakeVendors, phrases: Path
) -> None:
    audio = (phrases / "busy.wav").read_bytes()

    result = await _openai(fake).audio.transcriptions.create(
        model="gpt-4o-transcribe", file=("audio.wav", audio, "audio/wav"), language="en"
    )

    assert result.text == "I'm busy right now, call me later."
    [seen] = fake.requests
    assert seen.body["model"] == "gpt-4o-transcribe"
    assert seen.body["file"]["size"] == len(audio)


async def test_deepgram_prerecorded_and_speak(fake: FakeVendors, phrases: Path) -> None:
    headers = {"Authorization": f"Token {KEY}"}
    async with httpx.AsyncClient(base_url=fake.base_urls["deepgram"]) as client:
        heard = await client.post(
            "/v1/listen",
            params={"model": "nova-3"},
            content=(phrases / "goodbye.wav").read_bytes(),
            headers={**headers, "Content-Type": "audio/wav"},
        )
        spoken = await client.post(
            "/v1/speak",
            json={"text": "Hello"},
            headers=headers,
            params={
                "model": "aura-2-thalia-en",
                "encoding": "linear16",
                "sample_rate": 8000,
                "container": "none",
            },
        )

    assert heard.json()["results"]["channels"][0]["alternatives"][0]["transcript"] == "Goodbye."
    assert len(spoken.content) == int(0.275 * 8000) * 2
    assert fake.requests[0].headers["authorization"] == f"Token {KEY}"


# --- recognition robustness ----------------------------------------------------------------


async def _telephone(samples: Samples, rate: int, trim: float, pad: float) -> Samples:
    """A clip as the runtime's transcriber gets it: through Pipecat's μ-law at 8 kHz and back
    to 16 kHz, its speech cut short by `trim` seconds at each end (as a voice-activity detector
    may), with `pad` seconds of silence around."""
    resampler = SOXRAudioResampler()
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    ulaw = await pcm_to_ulaw(pcm, rate, 8000, resampler)
    heard = np.frombuffer(await ulaw_to_pcm(ulaw, 8000, RATE, resampler), "<i2") / 32768
    loud = np.flatnonzero(np.abs(heard) > 0.01 * np.abs(heard).max())
    cut = int(trim * RATE)
    speech = heard[loud[0] + cut : loud[-1] - cut]
    silence = np.zeros(int(pad * RATE))
    return np.asarray(np.concatenate([silence, speech, silence]), dtype=np.float64)


async def _transcribe(fake: FakeVendors, samples: Samples, rate: int = RATE) -> str:
    result = await _openai(fake).audio.transcriptions.create(
        model="gpt-4o-transcribe", file=("audio.wav", _wav(samples, rate), "audio/wav")
    )
    return result.text


@pytest.mark.parametrize("name", list(CLIPS))
@pytest.mark.parametrize(("trim", "pad"), [(0.0, 0.0), (0.2, 0.0), (0.0, 0.3), (0.2, 0.3)])
async def test_each_phrase_is_recognised_through_the_telephone(
    fake: FakeVendors, name: str, trim: float, pad: float
) -> None:
    text, pattern, rate = CLIPS[name]

    heard = await _telephone(_clip(pattern, rate), rate, trim, pad)

    assert await _transcribe(fake, heard) == text


async def test_silence_and_unknown_audio_transcribe_to_nothing(fake: FakeVendors) -> None:
    noise = np.random.default_rng(7).normal(0, 0.1, RATE * 2)
    other = _clip([(0.1, 0.1)] * 12, RATE)

    assert await _transcribe(fake, np.zeros(RATE)) == ""
    assert await _transcribe(fake, noise) == ""
    assert await _transcribe(fake, other) == ""


async def test_without_a_catalogue_everything_transcribes_to_nothing(
    tmp_path: Path, phrases: Path
) -> None:
    empty = FakeVendors(tmp_path)
    await empty.start()
    try:
        text = await _transcribe(empty, _read_wav((phrases / "hello.wav").read_bytes())[0], 8000)
    finally:
        await empty.stop()

    assert text == ""


# --- latency and failures ------------------------------------------------------------------


async def test_llm_first_token_latency_is_added(fake: FakeVendors) -> None:
    fake.configure(llm_first_token_ms=300)
    client = _openai(fake)

    started = time.monotonic()
    stream = await client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}], stream=True
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    waited = time.monotonic() - started

    assert 0.3 <= waited < 1.0


async def test_tts_first_byte_and_stt_latency_are_added(fake: FakeVendors, phrases: Path) -> None:
    fake.configure(tts_first_byte_ms=250, stt_ms=250)
    client = _openai(fake)

    started = time.monotonic()
    await client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hi", response_format="pcm"
    )
    await client.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", (phrases / "yes.wav").read_bytes(), "audio/wav")
    )

    assert 0.5 <= time.monotonic() - started < 1.5


async def test_an_unauthorised_vendor_raises_the_sdks_own_errors(fake: FakeVendors) -> None:
    fake.configure(failures={"llm": 401})

    with pytest.raises(openai.AuthenticationError):
        await _openai(fake).chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
    with pytest.raises(anthropic.AuthenticationError):
        await _anthropic(fake).messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
        )
    google_client = _google(fake)  # held: the client closes its session when collected
    with pytest.raises(genai_errors.ClientError) as google:
        await google_client.aio.models.generate_content(model="gemini-2.5-flash", contents="Hi")

    assert google.value.code == 401
    assert [r.status for r in fake.requests] == [401, 401, 401]


async def test_failures_by_vendor_and_kind_leave_the_rest_working(fake: FakeVendors) -> None:
    fake.configure(failures={"anthropic": 500, "openai.tts": 500})

    with pytest.raises(anthropic.InternalServerError):
        await _anthropic(fake).messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
        )
    with pytest.raises(openai.InternalServerError):
        await _openai(fake).audio.speech.create(
            model="tts-1", voice="alloy", input="Hi", response_format="pcm"
        )
    text, _ = await _openai_reply(_openai(fake), [{"role": "user", "content": "Hi"}])

    assert text == "Great, thank you for your time."


async def test_a_hanging_vendor_never_answers(fake: FakeVendors) -> None:
    fake.configure(failures={"deepseek": "hang"})
    client = openai.AsyncOpenAI(
        api_key=KEY, base_url=fake.base_urls["deepseek"], max_retries=0, timeout=0.5
    )

    with pytest.raises(openai.APITimeoutError):
        await client.chat.completions.create(
            model="deepseek-chat", messages=[{"role": "user", "content": "Hi"}]
        )

    assert [r.vendor for r in fake.requests] == ["deepseek"]


async def test_control_endpoints_configure_list_and_reset(fake: FakeVendors) -> None:
    async with httpx.AsyncClient(base_url=fake.origin) as control:
        configured = await control.post(
            "/_fake/config", json={"failures": {"grok": 500}, "stt_ms": 5}
        )
        refused = await control.post("/_fake/config", json={"nonsense": 1})
        failed = await control.post("/grok/v1/chat/completions", json={"messages": []})
        listed = (await control.get("/_fake/requests")).json()
        await control.post("/_fake/reset")
        after = (await control.get("/_fake/requests")).json()
        config = (await control.get("/_fake/config")).json()

    assert configured.json()["failures"] == {"grok": 500}
    assert (refused.status_code, failed.status_code) == (400, 500)
    assert [(r["vendor"], r["kind"], r["status"]) for r in listed] == [("grok", "llm", 500)]
    assert after == []
    assert (config["failures"], config["stt_ms"]) == ({}, 0)


# --- Pipecat's own services against the fake --------------------------------------------------


async def _frames(service: Any, *frames: Any) -> list[Any]:
    down, _ = await run_test(service, frames_to_send=list(frames))
    return list(down)


def _llm(vendor: str, fake: FakeVendors, system: str) -> Any:
    """The service as the runtime builds it: Anthropic's takes a client, not a base URL."""
    if vendor == "anthropic":
        return AnthropicLLMService(
            api_key=KEY,
            client=anthropic.AsyncAnthropic(api_key=KEY, base_url=fake.base_urls["anthropic"]),
            settings=AnthropicLLMService.Settings(
                model="claude-sonnet-4-5", system_instruction=system, temperature=0.5
            ),
        )
    if vendor == "google":
        return GoogleLLMService(
            api_key=KEY,
            http_options={"base_url": fake.base_urls["google"]},
            settings=GoogleLLMService.Settings(
                model="gemini-2.5-flash", system_instruction=system, temperature=0.5
            ),
        )
    return OpenAILLMService(
        api_key=KEY,
        base_url=fake.base_urls[vendor],
        settings=OpenAILLMService.Settings(
            model="gpt-4.1", system_instruction=system, temperature=0.5
        ),
    )


def _temperature(body: dict[str, Any]) -> Any:
    return body.get("temperature", (body.get("generationConfig") or {}).get("temperature"))


@pytest.mark.parametrize("vendor", ["openai", "grok", "anthropic", "google"])
async def test_pipecat_llm_services_stream_the_reply(fake: FakeVendors, vendor: str) -> None:
    service = _llm(vendor, fake, "You are Ada. [fake:reply=Hi, this is Ada.]")
    context = LLMContext([{"role": "user", "content": "Hello?"}])

    frames = await _frames(service, LLMContextFrame(context))

    assert "".join(f.text for f in frames if isinstance(f, LLMTextFrame)) == "Hi, this is Ada."
    [seen] = fake.requests
    assert _temperature(seen.body) == 0.5
    assert "You are Ada." in json.dumps(seen.body)


@pytest.mark.parametrize("vendor", ["openai", "deepseek", "anthropic", "google"])
async def test_pipecat_llm_services_call_end_call_on_goodbye(
    fake: FakeVendors, vendor: str
) -> None:
    service = _llm(vendor, fake, GOODBYE_PROMPT)
    called: list[str] = []

    async def end_call(params: FunctionCallParams) -> None:
        called.append(params.function_name)
        await params.result_callback({"ok": True})

    service.register_function("end_call", end_call)
    end_call_schema = FunctionSchema(
        name="end_call", description="Hang up.", properties={}, required=[]
    )
    context = LLMContext(
        [{"role": "user", "content": "Thanks, goodbye."}],
        tools=ToolsSchema(standard_tools=[end_call_schema]),
    )

    await _frames(service, LLMContextFrame(context))

    assert called == ["end_call"]


async def test_pipecat_openai_stt_service_transcribes_a_spoken_phrase(fake: FakeVendors) -> None:
    text, pattern, rate = CLIPS["repeat"]
    heard = await _telephone(_clip(pattern, rate), rate, trim=0.0, pad=0.2)
    pcm = (heard * 32767).astype("<i2").tobytes()
    chunk = RATE // 50 * 2
    audio = [InputAudioRawFrame(pcm[i : i + chunk], RATE, 1) for i in range(0, len(pcm), chunk)]
    service = OpenAISTTService(api_key=KEY, base_url=fake.base_urls["openai"])

    frames = await _frames(
        service,
        VADUserStartedSpeakingFrame(),
        *audio,
        VADUserStoppedSpeakingFrame(),
        SleepFrame(0.5),
    )

    assert [f.text for f in frames if isinstance(f, TranscriptionFrame)] == [text]
    [seen] = fake.requests
    assert seen.body["model"] == "gpt-transcribe"


@pytest.mark.parametrize("vendor", ["openai", "elevenlabs", "cartesia", "deepgram"])
async def test_pipecat_http_tts_services_get_speech_as_long_as_the_text(
    fake: FakeVendors, vendor: str
) -> None:
    text = "Your appointment is at ten."
    async with aiohttp.ClientSession() as session:
        service = _tts(vendor, fake.base_urls[vendor], session)
        frames = await _frames(service, TTSSpeakFrame(text))

    audio = b"".join(f.audio for f in frames if isinstance(f, TTSAudioRawFrame))
    rates = {f.sample_rate for f in frames if isinstance(f, TTSAudioRawFrame)}
    assert rates == {24000}
    assert len(audio) / 2 / 24000 == pytest.approx(0.055 * len(text), abs=0.01)
    [seen] = fake.requests
    assert seen.answer == text


def _tts(vendor: str, base_url: str, session: aiohttp.ClientSession) -> Any:
    if vendor == "openai":
        return OpenAITTSService(api_key=KEY, base_url=base_url, sample_rate=24000)
    if vendor == "elevenlabs":
        return ElevenLabsHttpTTSService(
            api_key=KEY,
            base_url=base_url,
            aiohttp_session=session,
            sample_rate=24000,
            settings=ElevenLabsHttpTTSService.Settings(voice="v1"),
        )
    if vendor == "cartesia":
        return CartesiaHttpTTSService(
            api_key=KEY,
            base_url=base_url,
            aiohttp_session=session,
            sample_rate=24000,
            settings=CartesiaHttpTTSService.Settings(voice="v1"),
        )
    return DeepgramHttpTTSService(
        api_key=KEY, base_url=base_url, aiohttp_session=session, sample_rate=24000
    )
