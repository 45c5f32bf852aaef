"""A malformed message from the carrier during a call (CONTRACT 11): dropped and counted at the
runtime's /metrics, the call going on as if it had not been sent."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pipecat.frames.frames import InputAudioRawFrame, StartFrame
from pipecat.serializers.twilio import TwilioFrameSerializer

from integrations.telephony import mulaw, sandbox_media
from tests.voice.test_call_scripts import PERSON, REPLY, call_through, said, stored, voice_metrics
from voice.transport import MediaStreamSerializer

MALFORMED: list[str | bytes] = [
    "not json {",
    json.dumps(
        {
            "event": "media",
            "streamSid": "MZ1",
            "media": {"track": "inbound", "payload": "@@not base64@@"},
        }
    ),
    json.dumps({"event": "media", "streamSid": "MZ1", "media": {"track": "inbound"}}),
    json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": 12345}}),
    json.dumps({"event": "media", "streamSid": "MZ1", "media": "payload"}),
    b"\x00\x01\xffbinary",
    json.dumps(["a", "list"]),
    json.dumps({"event": "dtmf", "streamSid": "MZ1", "dtmf": "not an object"}),
]
MALFORMED_TOTAL = "switchboard_voice_malformed_frames_total"


async def test_the_serializer_drops_what_it_cannot_read_and_keeps_the_audio() -> None:
    serializer = MediaStreamSerializer(
        "MZ1", params=TwilioFrameSerializer.InputParams(auto_hang_up=False)
    )
    await serializer.setup(StartFrame(audio_in_sample_rate=8000, audio_out_sample_rate=8000))
    speech = [bytes([byte]) * 160 for byte in (0x10, 0x90)]

    def media(payload: bytes) -> str:
        return json.dumps(
            {
                "event": "media",
                "streamSid": "MZ1",
                "media": {"track": "inbound", "payload": base64.b64encode(payload).decode()},
            }
        )

    frames = [await serializer.deserialize(media(speech[0]))]
    frames += [await serializer.deserialize(bad) for bad in MALFORMED]
    frames.append(await serializer.deserialize(media(speech[1])))

    assert frames[:-1] == [None] * (1 + len(MALFORMED))
    assert serializer.malformed == len(MALFORMED)
    # The audio either side of them is joined as if they had not come.
    last = frames[-1]
    assert isinstance(last, InputAudioRawFrame)
    assert last.audio == mulaw.decode(b"".join(speech))


@pytest.mark.voice_e2e
async def test_malformed_carrier_messages_are_dropped_and_the_call_goes_on(
    client, pool, tenant, worker, vendors, voice_runtime, monkeypatch
) -> None:
    """The sandbox contact of a real call sends, among its media, one of each malformed kind
    every 40 frames (0.8 s) from its 5th on: during its lines and the agent's."""
    send_media = sandbox_media._Stream._send_media
    sent: list[str | bytes] = []

    async def with_malformed(stream: Any, pcm: bytes) -> None:
        k = stream.frames_sent
        if k >= 5 and (k - 5) % 40 == 0:
            bad = MALFORMED[len(sent) % len(MALFORMED)]
            await stream.ws.send(bad)
            sent.append(bad)
        await send_media(stream, pcm)

    monkeypatch.setattr(sandbox_media._Stream, "_send_media", with_malformed)
    before = (await voice_metrics(voice_runtime)).get(f"{MALFORMED_TOTAL}[]", 0.0)
    call = await call_through(client, tenant, PERSON)
    after = (await voice_metrics(voice_runtime)).get(f"{MALFORMED_TOTAL}[]", 0.0)

    record = await stored(pool, tenant, call["id"])
    assert len(sent) >= len(MALFORMED), sent  # each kind, at least once
    assert after - before == len(sent)
    assert call["status"] == "completed", record
    assert record["ended_reason"] == "customer_hangup" and record["error"] is None
    assert said(record["messages"]) == [
        ("contact", "Hello?"),
        ("agent", REPLY),
        ("contact", "Yes, I have a minute."),
        ("agent", REPLY),
        ("contact", "That sounds good."),
        ("agent", REPLY),
        ("contact", "Thank you, goodbye."),
    ]
