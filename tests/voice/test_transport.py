"""voice/transport.py: the agent's audio goes out with a lead of LEAD_SECONDS, catches up after a
stall shorter than the lead; the contact's 20 ms messages enter as 40 ms frames (the private names
of Pipecat's transport it relies on are checked in tests/voice/test_pipecat_seam.py)."""

from __future__ import annotations

import base64
import json

import pytest
from pipecat.frames.frames import InputAudioRawFrame, StartFrame
from pipecat.serializers.twilio import TwilioFrameSerializer

from integrations.telephony import mulaw
from voice.transport import (
    LEAD_SECONDS,
    MediaStreamSerializer,
    pace,
)

CHUNK = 0.04  # Pipecat's output chunk: 40 ms


def send(chunks: int, stall_at: int | None = None, stall: float = 0.0) -> list[float]:
    """When each chunk of an utterance leaves, on a simulated clock, the sender stalling for
    `stall` seconds before chunk `stall_at`."""
    now, playout, sent = 100.0, 0.0, []
    for index in range(chunks):
        if index == stall_at:
            now += stall
        sent.append(now)
        wait, playout = pace(now, playout, CHUNK)
        now += wait
    return sent


def late(sent: list[float]) -> list[float]:
    """How late each chunk left for a far end that plays from the first chunk on, in real time
    (the bench's measure: more than 40 ms behind is a late frame)."""
    return [at - (sent[0] + index * CHUNK) for index, at in enumerate(sent)]


def test_the_first_lead_of_an_utterance_goes_at_once_then_real_time() -> None:
    sent = send(50)
    ahead = round(LEAD_SECONDS / CHUNK)
    # The first chunk and the lead's worth after it leave at once ...
    assert [round(at - sent[0], 6) for at in sent[: ahead + 1]] == [0.0] * (ahead + 1)
    # ... then one chunk per chunk of audio.
    gaps = {round(b - a, 6) for a, b in zip(sent[ahead:], sent[ahead + 1 :], strict=False)}
    assert gaps == {CHUNK}
    assert max(late(sent)) <= 1e-9  # never behind the far end's playback


def test_a_stall_shorter_than_the_lead_costs_the_contact_nothing() -> None:
    sent = send(50, stall_at=20, stall=0.15)
    assert max(late(sent)) <= 1e-9
    assert sent[-1] - sent[0] == pytest.approx(49 * CHUNK - LEAD_SECONDS)  # caught up


def test_a_stall_longer_than_the_lead_starts_again_from_now() -> None:
    sent = send(50, stall_at=20, stall=0.5)
    # The far end ran dry for the part of the stall beyond what it had buffered; from there the
    # sender refills the lead, so nothing after is later than the chunk after the stall.
    after = late(sent)[20:]
    assert after[0] == pytest.approx(0.5 - LEAD_SECONDS, abs=1e-6)
    assert max(after) == after[0]
    assert after[-1] == pytest.approx(0.5 - 2 * LEAD_SECONDS, abs=1e-6)


def test_after_an_interruption_the_next_utterance_gets_a_fresh_lead() -> None:
    # Pipecat sets the playout moment to 0 on an interruption (checked below).
    wait, playout = pace(500.0, 0.0, CHUNK)
    assert (wait, playout) == (0.0, 500.0 + CHUNK)


async def test_the_contacts_20_ms_messages_enter_the_pipeline_as_40_ms_frames() -> None:
    serializer = MediaStreamSerializer(
        "MZ1", params=TwilioFrameSerializer.InputParams(auto_hang_up=False)
    )
    await serializer.setup(StartFrame(audio_in_sample_rate=8000, audio_out_sample_rate=8000))
    speech = [bytes([byte]) * 160 for byte in (0x10, 0x90, 0x30, 0xB0)]  # four 20 ms messages

    frames = [
        await serializer.deserialize(
            json.dumps(
                {
                    "event": "media",
                    "streamSid": "MZ1",
                    "media": {
                        "track": "inbound",
                        "chunk": str(n),
                        "timestamp": str(20 * n),
                        "payload": base64.b64encode(payload).decode(),
                    },
                }
            )
        )
        for n, payload in enumerate(speech)
    ]

    assert frames[0] is None and frames[2] is None
    assert all(isinstance(frame, InputAudioRawFrame) for frame in (frames[1], frames[3]))
    joined = b"".join(frame.audio for frame in frames if frame is not None)
    assert joined == mulaw.decode(b"".join(speech))  # every sample, in order
    assert [len(frame.audio) for frame in frames if frame is not None] == [640, 640]  # 40 ms
    dtmf = await serializer.deserialize(
        json.dumps({"event": "dtmf", "streamSid": "MZ1", "dtmf": {"digit": "5"}})
    )
    assert dtmf is not None and not isinstance(dtmf, InputAudioRawFrame)  # passed on at once
