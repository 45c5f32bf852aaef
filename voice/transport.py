"""The carrier's Media Streams connection: Pipecat's FastAPI WebSocket transport, with the agent's
audio sent a little ahead of real time.

Pipecat's output paces audio at exactly real time and, once it is late, starts its clock again
from there: every stall of the event loop (another call starting, a garbage collection, a busy
moment) shifts the rest of the utterance late for good, and the contact hears a gap each time
(bench/RESULTS.md, voice: late messages from 10 calls on). A carrier buffers the audio it has not
played yet (Twilio does, and so does the sandbox contact), and a barge-in's `clear` drops that
buffer, so sending ahead costs the contact nothing when they cut in.

`LeadingOutput` keeps up to LEAD_SECONDS of an utterance in flight: its first LEAD_SECONDS go out
at once, the rest at real time, and after a stall shorter than the lead it catches up instead of
starting late. Pipecat's pacing and its transport's output are private: they are reached
through voice/pipecat_seam.py.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from typing import Any

from pipecat.frames.frames import Frame, InputAudioRawFrame
from pipecat.serializers.twilio import TwilioFrameSerializer

from voice import metrics
from voice.pipecat_seam import PacedWebsocketOutput, WebsocketTransport

log = logging.getLogger("switchboard.voice")

LEAD_SECONDS = 0.2
# The contact's audio enters the pipeline in frames of this length (Twilio sends 20 ms).
INPUT_FRAME_SECONDS = 0.04


def pace(
    now: float, playout: float, chunk_seconds: float, lead: float = LEAD_SECONDS
) -> tuple[float, float]:
    """After a chunk of `chunk_seconds` was sent at `now`: how long to wait before the next,
    and when the far end will have played everything sent. `playout` is that moment before this
    chunk (0 or past: nothing left to play, so this chunk plays from now)."""
    playout = max(now, playout) + chunk_seconds
    return max(0.0, playout - lead - now), playout


class LeadingOutput(PacedWebsocketOutput):
    """Pipecat's output with `pace` in place of its real-time sleep. Pipecat resets the playout
    moment to 0 on an interruption, which starts the next utterance with a fresh lead."""

    def audio_wait(self, playout: float, chunk_seconds: float) -> tuple[float, float]:
        return pace(time.monotonic(), playout, chunk_seconds)


class MediaStreamSerializer(TwilioFrameSerializer):
    """Twilio's Media Streams serializer, the contact's 20 ms media messages joined into frames of
    INPUT_FRAME_SECONDS. A frame costs about the same to move through the pipeline's dozen stages
    whatever its length, and that movement is most of a call's CPU (bench/RESULTS.md, voice);
    Silero listens in 32 ms windows, so the end of a turn is heard at most 20 ms later.

    A malformed message from the carrier (not a JSON object in a text frame, or a `media` event
    without valid base64 audio) is dropped and counted (`switchboard_voice_malformed_frames_total`,
    CONTRACT 11): Pipecat's own reader would end the call on it, as if the contact had hung up."""

    def __init__(self, stream_sid: str, params: TwilioFrameSerializer.InputParams) -> None:
        super().__init__(stream_sid, params=params)
        self.stream_sid = stream_sid
        self._held_audio = b""
        self.malformed = 0

    async def deserialize(self, data: str | bytes) -> Frame | None:
        problem = malformed(data)
        if problem is None:
            try:
                frame = await super().deserialize(data)
            except Exception as exc:  # whatever else Pipecat cannot read: dropped all the same
                problem = f"unreadable ({type(exc).__name__})"
        if problem is not None:
            self._drop(problem)
            return None
        if not isinstance(frame, InputAudioRawFrame):
            return frame
        self._held_audio += frame.audio
        size = int(frame.sample_rate * INPUT_FRAME_SECONDS) * 2 * frame.num_channels
        if len(self._held_audio) < size:
            return None
        audio, self._held_audio = self._held_audio, b""
        return InputAudioRawFrame(
            audio=audio, sample_rate=frame.sample_rate, num_channels=frame.num_channels
        )

    def _drop(self, problem: str) -> None:
        metrics.MALFORMED_FRAMES.inc()
        self.malformed += 1
        if self.malformed == 1:  # once per stream: a carrier gone wrong would flood the log
            log.warning(
                "stream %s: dropped a malformed carrier message (%s); further ones are "
                "counted in switchboard_voice_malformed_frames_total",
                self.stream_sid,
                problem,
            )


def malformed(data: str | bytes) -> str | None:
    """Why a carrier message cannot be read, or None. Media Streams messages are JSON objects in
    text frames; a `media` event carries its audio as a non-empty base64 `payload`."""
    if not isinstance(data, str):
        return "not a text frame"
    try:
        message: Any = json.loads(data)
    except ValueError:
        return "not JSON"
    if not isinstance(message, dict):
        return "not a JSON object"
    if message.get("event") != "media":
        return None
    media = message.get("media")
    payload = media.get("payload") if isinstance(media, dict) else None
    if not isinstance(payload, str) or not payload:
        return "media without a payload"
    try:
        base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return "media payload is not base64"
    return None


class MediaStreamTransport(WebsocketTransport):
    """Pipecat's FastAPI WebSocket transport, the agent's audio sent with a lead."""

    output_class = LeadingOutput
