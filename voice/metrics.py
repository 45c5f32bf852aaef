"""Prometheus metrics of one `switchboard voice` process, at its /metrics.

- calls on the line now, and calls ended by ended_reason (a stream refused is `refused`);
- streams refused because the process had SWITCHBOARD_VOICE_MAX_CALLS calls (closed with 1013
  once their call token was checked; the carrier tries again);
- connections that have not yet named a call (voice/call.py AUTH_SECONDS), and those closed to
  make room beyond MAX_PENDING_STREAMS;
- carrier messages dropped as malformed during a call;
- times the event loop was held past SWITCHBOARD_VOICE_LOOP_STALL_MS (voice/loop_watchdog.py
  logs each with the loop thread's stack);
- the agent's response time per turn: from the moment the runtime decided the contact's turn
  was over (the VAD's stop, voice_activity_timeout after the last speech) to the agent's first
  audio frame written to the carrier. Vendor time is inside it; the benchmark (bench/voice)
  subtracts the fake vendors' known latencies to get the runtime's own share.

Every value is also logged per turn (`agent responded ... ms after the turn ended`) at INFO.
"""

from __future__ import annotations

import logging
import time

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    Frame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

log = logging.getLogger("switchboard.voice.turns")

REGISTRY = CollectorRegistry(auto_describe=True)
CALLS_ACTIVE = Gauge(
    "switchboard_voice_calls_active", "Calls on the line in this process", registry=REGISTRY
)
CALLS_ENDED = Counter(
    "switchboard_voice_calls_total",
    "Calls ended, by ended_reason",
    ["ended_reason"],
    registry=REGISTRY,
)
STREAMS_BUSY = Counter(
    "switchboard_voice_streams_busy_total",
    "Media streams of a valid call refused (1013) at the process's call limit",
    registry=REGISTRY,
)
STREAMS_PENDING = Gauge(
    "switchboard_voice_streams_pending",
    "Connections that have not yet named a call with a valid token",
    registry=REGISTRY,
)
STREAMS_EVICTED = Counter(
    "switchboard_voice_streams_evicted_total",
    "Connections that had not named a call, closed (1013) to make room "
    "for a new one beyond the pending limit",
    registry=REGISTRY,
)
MALFORMED_FRAMES = Counter(
    "switchboard_voice_malformed_frames_total",
    "Carrier messages dropped during a call as malformed (not a JSON "
    "object in a text frame, or media without valid base64 audio)",
    registry=REGISTRY,
)
LOOP_STALLS = Counter(
    "switchboard_voice_loop_stalls_total",
    "Times the event loop was held past SWITCHBOARD_VOICE_LOOP_STALL_MS (voice/loop_watchdog.py)",
    registry=REGISTRY,
)
RESPONSE = Histogram(
    "switchboard_voice_response_seconds",
    "End of the contact's turn (as decided) to the agent's first audio sent, vendors included",
    registry=REGISTRY,
    buckets=(0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 2, 3, 5, 10),
)
ENDED_REASONS = (
    "customer_hangup",
    "agent_hangup",
    "silence_timeout",
    "max_duration",
    "voicemail",
    "no_answer",
    "busy",
    "failed",
    "refused",
)


def exposition() -> tuple[bytes, str]:
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def call_ended(reason: str) -> None:
    CALLS_ENDED.labels(reason if reason in ENDED_REASONS else "failed").inc()


class ResponseTimer(FrameProcessor):
    """Times each agent response; placed after the user aggregator, where the VAD's frames pass
    downstream and the output's BotStartedSpeakingFrame passes upstream."""

    def __init__(self, call_id: str) -> None:
        super().__init__()
        self._call_id = call_id
        self._turn_ended: float | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            self._turn_ended = time.monotonic()
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            self._turn_ended = None  # the contact went on: the turn had not ended
        elif isinstance(frame, BotStartedSpeakingFrame) and self._turn_ended is not None:
            seconds = time.monotonic() - self._turn_ended
            self._turn_ended = None
            RESPONSE.observe(seconds)
            log.info(
                "agent responded %.1f ms after the turn ended (call %s)",
                seconds * 1000,
                self._call_id,
            )
        await self.push_frame(frame, direction)
