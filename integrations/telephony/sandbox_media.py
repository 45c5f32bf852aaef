"""The sandbox carrier's contact: dials the voice runtime over Media Streams and plays a script.

The carrier is simulated, the conversation is not: the contact connects to the runtime's Media
Streams WebSocket exactly as Twilio would (connected, start, 20 ms μ-law media frames in real
time, stop), says its lines from the bundled recordings, and hears the agent. The agent's audio is
"played" at real time as a phone would play it, so `clear` drops what has not been heard yet and a
`mark` is echoed once the audio before it has been heard.

Which script a contact follows is chosen by the last four digits of its number (`script_for`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from integrations.telephony import TelephonyError, mulaw
from integrations.telephony.sandbox_audio import CLIPS, SAMPLE_RATE, load_clip

ScriptKind = Literal[
    "person", "talkative", "interrupting", "answering_machine", "silent", "no_answer", "busy"
]
AnsweredBy = Literal["human", "machine"]
EndedBy = Literal["contact", "runtime", "timeout"]

STREAM_PATH = "/voice/twilio/stream"
# A runtime at its call limit (503 to the handshake, or the stream closed with 1013 "try again
# later" once its start was read): dial again this often, for this long.
BUSY_RETRY_SECONDS = 0.5
BUSY_SECONDS = 60.0
TRY_AGAIN_LATER = 1013
FRAME_SECONDS = 0.02
FRAME_SAMPLES = 160
TURN_GAP_SECONDS = 0.7  # the agent's silence after which the contact takes its turn
HANGUP_DELAY_SECONDS = 0.5
# The interrupting contact cuts in once the agent has been speaking this long in a turn.
INTERRUPT_AFTER_SECONDS = 1.0
UTTERANCE_GAP_SECONDS = 0.3
# Agent audio quieter than this (RMS of a 20 ms frame) is silence: speech is well above it and a
# background ambience bed is mixed well below it.
SPEECH_RMS = 2000.0  # about -24 dBFS

NEVER_CONNECTS: frozenset[ScriptKind] = frozenset({"no_answer", "busy"})
_BY_SUFFIX: dict[str, ScriptKind] = {
    "0144": "interrupting",
    "0155": "talkative",
    "0166": "answering_machine",
    "0177": "silent",
    "0186": "no_answer",
    "0187": "busy",
}
# What each script says, in order. A conversing contact says its first line on answer, each later
# one after an agent turn, and hangs up after the last; a machine plays its lines back to back.
_LINES: dict[ScriptKind, tuple[str, ...]] = {
    "person": ("hello", "minute", "sounds_good", "goodbye"),
    "talkative": ("hello", "talk_1", "talk_2", "talk_3"),
    "interrupting": ("hello", "minute", "sounds_good", "goodbye"),
    "answering_machine": ("voicemail_greeting", "beep"),
}
_CONVERSING: frozenset[ScriptKind] = frozenset({"person", "talkative", "interrupting"})


def script_for(phone_number: str) -> ScriptKind:
    """The script of the contact at `phone_number`, by its last four digits."""
    return _BY_SUFFIX.get(phone_number[-4:], "person")


def answered_by_for(script: ScriptKind) -> AnsweredBy:
    """The sandbox's answering-machine signal, as Twilio's AnsweredBy reports it."""
    return "machine" if script == "answering_machine" else "human"


def stream_url(voice_url: str) -> str:
    """The runtime's Media Streams address under `SWITCHBOARD_VOICE_URL`."""
    return voice_url.rstrip("/") + STREAM_PATH


@dataclass(frozen=True)
class ContactSession:
    call_sid: str
    account_sid: str
    stream_sid: str
    script: ScriptKind
    # Sent verbatim as the start event's customParameters (call id, sub-account, signature...).
    custom_parameters: Mapping[str, str] = field(default_factory=dict)
    max_seconds: float = 600.0

    @property
    def answered_by(self) -> AnsweredBy:
        return answered_by_for(self.script)


@dataclass(frozen=True)
class ContactLine:
    """One recording the contact said; seconds count from the answer."""

    name: str
    text: str
    start_seconds: float
    end_seconds: float
    finished: bool = True  # False when the call ended while it was being said


@dataclass(frozen=True)
class AgentAudio:
    """One media message from the runtime: PCM16 at 8 kHz, and when it arrived after the answer."""

    arrived_seconds: float
    pcm: bytes


@dataclass(frozen=True)
class ContactResult:
    ended_by: EndedBy
    duration_seconds: float
    lines: list[ContactLine]
    agent_chunks: list[AgentAudio]
    # Agent speech as the contact heard it (played at real time, cleared audio left out),
    # split where it was silent for UTTERANCE_GAP_SECONDS or more.
    agent_utterances: list[tuple[float, float]]
    beep_end_seconds: float | None
    clear_seconds: list[float]
    marks_echoed: list[str]
    frames_sent: int

    @property
    def agent_audio(self) -> bytes:
        """Every agent sample received, in order (cleared audio included)."""
        return b"".join(chunk.pcm for chunk in self.agent_chunks)

    @property
    def clears(self) -> int:
        return len(self.clear_seconds)


def _speech_frames(samples: np.ndarray) -> np.ndarray:
    """Per 20 ms frame of `samples`, whether it is louder than silence."""
    padded = np.zeros(math.ceil(samples.size / FRAME_SAMPLES) * FRAME_SAMPLES, dtype=np.float64)
    padded[: samples.size] = samples
    frames = padded.reshape(-1, FRAME_SAMPLES)
    rms: np.ndarray = np.sqrt(np.mean(frames * frames, axis=1))
    return rms > SPEECH_RMS


class _Earpiece:
    """The agent's audio as the contact hears it: queued and played at real time."""

    def __init__(self) -> None:
        self.segments: list[tuple[float, np.ndarray]] = []
        self.play_end = 0.0
        self.last_speech_end = -math.inf
        self.speech_start = -math.inf  # where the utterance being heard (or the last) began
        self._marks: list[tuple[float, str]] = []

    def play(self, now: float, pcm: bytes) -> None:
        samples = np.frombuffer(pcm, dtype="<i2")
        start = max(now, self.play_end)
        self.segments.append((start, samples))
        self.play_end = start + samples.size / SAMPLE_RATE
        speech = np.flatnonzero(_speech_frames(samples))
        if speech.size:
            begin = start + int(speech[0]) * FRAME_SAMPLES / SAMPLE_RATE
            if begin - self.last_speech_end >= UTTERANCE_GAP_SECONDS:
                self.speech_start = begin
            end = min((int(speech[-1]) + 1) * FRAME_SAMPLES, samples.size) / SAMPLE_RATE
            self.last_speech_end = max(self.last_speech_end, start + end)

    def mark(self, now: float, name: str) -> None:
        self._marks.append((max(now, self.play_end), name))

    def clear(self, now: float) -> None:
        """Drop what is not yet played; marks still pending are due at once, as Twilio does."""
        self.drop_unplayed(now)
        self._marks = [(now, name) for _, name in self._marks]

    def drop_unplayed(self, now: float) -> None:
        kept = []
        for start, samples in self.segments:
            if start < now:
                kept.append((start, samples[: int((now - start) * SAMPLE_RATE)]))
        self.segments = kept
        self.play_end = min(self.play_end, now)
        self.last_speech_end = min(self.last_speech_end, now)

    def due_marks(self, now: float) -> list[str]:
        due = [name for at, name in self._marks if at <= now]
        self._marks = [(at, name) for at, name in self._marks if at > now]
        return due

    def utterances(self) -> list[tuple[float, float]]:
        spans: list[tuple[float, float]] = []
        for start, samples in self.segments:
            seconds = samples.size / SAMPLE_RATE
            for i in np.flatnonzero(_speech_frames(samples)):
                begin = start + int(i) * FRAME_SECONDS
                spans.append((begin, min(begin + FRAME_SECONDS, start + seconds)))
        merged: list[tuple[float, float]] = []
        for begin, end in sorted(spans):
            if merged and begin - merged[-1][1] < UTTERANCE_GAP_SECONDS:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((begin, end))
        return [(round(b, 3), round(e, 3)) for b, e in merged]


class _Contact:
    """The script: what the contact says in each 20 ms frame, given what it has heard."""

    def __init__(self, script: ScriptKind) -> None:
        self.script = script
        self.lines: list[ContactLine] = []
        self.beep_end: float | None = None
        self.hangup_at = math.inf
        self._to_say = list(_LINES.get(script, ()))
        self._saying: tuple[str, np.ndarray, float] | None = None
        self._position = 0
        self._said_last_at: float | None = None

    def frame(self, now: float, heard: _Earpiece) -> bytes:
        if self._saying is None and self._ready_for_next(now, heard):
            name = self._to_say.pop(0)
            self._saying = (name, np.frombuffer(load_clip(name), dtype="<i2"), now)
            self._position = 0
        if self._saying is None:
            return bytes(2 * FRAME_SAMPLES)
        name, samples, start = self._saying
        chunk = samples[self._position : self._position + FRAME_SAMPLES]
        self._position += FRAME_SAMPLES
        if self._position >= samples.size:
            self._finish(name, start, start + samples.size / SAMPLE_RATE)
        out = np.zeros(FRAME_SAMPLES, dtype="<i2")
        out[: chunk.size] = chunk
        return out.tobytes()

    def cut(self, sent_until: float) -> None:
        """The call ended: the line being said stops where it got to on the line, `sent_until`
        (a frame made as the call ended was never sent)."""
        if self._saying is not None:
            name, samples, start = self._saying
            end = min(start + min(self._position, samples.size) / SAMPLE_RATE, sent_until)
            line = ContactLine(name, CLIPS[name].text, round(start, 3), round(end, 3), False)
            self.lines.append(line)
            self._saying = None

    def _ready_for_next(self, now: float, heard: _Earpiece) -> bool:
        if not self._to_say:
            return False
        if self._said_last_at is None or self.script not in _CONVERSING:
            return True
        agent_answered = heard.last_speech_end > self._said_last_at
        if self.script == "interrupting":
            return (
                agent_answered
                and heard.speech_start > self._said_last_at
                and now - heard.speech_start >= INTERRUPT_AFTER_SECONDS
            )
        return agent_answered and now - heard.last_speech_end >= TURN_GAP_SECONDS

    def _finish(self, name: str, start: float, end: float) -> None:
        self.lines.append(ContactLine(name, CLIPS[name].text, round(start, 3), round(end, 3)))
        self._saying = None
        self._said_last_at = end
        if name == "beep":
            self.beep_end = round(end, 3)
        elif not self._to_say and self.script in _CONVERSING:
            self.hangup_at = end + HANGUP_DELAY_SECONDS


class _Stream:
    """One Media Streams connection: a task that sends frames on a clock, one that receives."""

    def __init__(self, ws: ClientConnection, session: ContactSession) -> None:
        self.ws = ws
        self.session = session
        self.contact = _Contact(session.script)
        self.heard = _Earpiece()
        self.chunks: list[AgentAudio] = []
        self.clear_seconds: list[float] = []
        self.marks_echoed: list[str] = []
        self.frames_sent = 0
        self.t0 = 0.0
        self._sequence = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    async def _send(self, message: dict[str, Any], numbered: bool = True) -> None:
        if numbered:
            self._sequence += 1
            message = {
                "event": message["event"],
                "sequenceNumber": str(self._sequence),
                **{k: v for k, v in message.items() if k != "event"},
            }
        await self.ws.send(json.dumps(message))

    async def run(self) -> EndedBy:
        s = self.session
        self.t0 = time.monotonic()
        try:
            await self._send(
                {"event": "connected", "protocol": "Call", "version": "1.0.0"}, numbered=False
            )
            await self._send(
                {
                    "event": "start",
                    "start": {
                        "accountSid": s.account_sid,
                        "streamSid": s.stream_sid,
                        "callSid": s.call_sid,
                        "tracks": ["inbound"],
                        "customParameters": dict(s.custom_parameters),
                        "mediaFormat": {
                            "encoding": "audio/x-mulaw",
                            "sampleRate": SAMPLE_RATE,
                            "channels": 1,
                        },
                    },
                    "streamSid": s.stream_sid,
                }
            )
        except ConnectionClosed:  # the runtime closed the connection at once
            return "runtime"
        self.t0 = time.monotonic()
        sender = asyncio.create_task(self._send_frames())
        receiver = asyncio.create_task(self._receive())
        try:
            await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
            if not sender.done():
                return "runtime"
            ended_by = sender.result()
            if ended_by != "runtime":
                await self._hang_up()
            await receiver
            return ended_by
        finally:
            for task in (sender, receiver):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _hang_up(self) -> None:
        s = self.session
        with contextlib.suppress(ConnectionClosed):
            await self._send(
                {
                    "event": "stop",
                    "streamSid": s.stream_sid,
                    "stop": {"accountSid": s.account_sid, "callSid": s.call_sid},
                }
            )
        await self.ws.close()

    async def _send_frames(self) -> EndedBy:
        # Frame k leaves at t0 + k * 20 ms: a fixed schedule, so lateness never accumulates.
        try:
            while True:
                now = self.frames_sent * FRAME_SECONDS
                if now >= self.session.max_seconds:
                    return "timeout"
                if now >= self.contact.hangup_at:
                    return "contact"
                for name in self.heard.due_marks(self.elapsed()):
                    await self._send(
                        {
                            "event": "mark",
                            "streamSid": self.session.stream_sid,
                            "mark": {"name": name},
                        }
                    )
                    self.marks_echoed.append(name)
                await self._send_media(self.contact.frame(now, self.heard))
                delay = self.t0 + self.frames_sent * FRAME_SECONDS - time.monotonic()
                await asyncio.sleep(max(delay, 0.0))
        except ConnectionClosed:
            return "runtime"

    async def _send_media(self, pcm: bytes) -> None:
        k = self.frames_sent
        await self._send(
            {
                "event": "media",
                "media": {
                    "track": "inbound",
                    "chunk": str(k + 1),
                    "timestamp": str(k * 20),
                    "payload": base64.b64encode(mulaw.encode(pcm)).decode("ascii"),
                },
                "streamSid": self.session.stream_sid,
            }
        )
        self.frames_sent += 1

    async def _receive(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in self.ws:
                with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                    self._handle(json.loads(message))

    def _handle(self, message: dict[str, Any]) -> None:
        now = self.elapsed()
        event = message.get("event")
        if event == "media":
            pcm = mulaw.decode(base64.b64decode(message["media"]["payload"]))
            self.chunks.append(AgentAudio(round(now, 3), pcm))
            self.heard.play(now, pcm)
        elif event == "clear":
            self.clear_seconds.append(round(now, 3))
            self.heard.clear(now)
        elif event == "mark":
            self.heard.mark(now, str(message["mark"]["name"]))

    def result(self, ended_by: EndedBy) -> ContactResult:
        # What the runtime sent but the line had not yet played when the call ended went unheard.
        end = self.elapsed()
        self.contact.cut(self.frames_sent * FRAME_SECONDS)
        self.heard.drop_unplayed(end)
        return ContactResult(
            ended_by=ended_by,
            duration_seconds=round(end, 3),
            lines=self.contact.lines,
            agent_chunks=self.chunks,
            agent_utterances=self.heard.utterances(),
            beep_end_seconds=self.contact.beep_end,
            clear_seconds=self.clear_seconds,
            marks_echoed=self.marks_echoed,
            frames_sent=self.frames_sent,
        )


async def dial(url: str, deadline: float | None = None) -> ClientConnection:
    """The runtime's Media Streams WebSocket. A process at its call limit may answer 503: the
    line keeps ringing and the carrier dials again (another process may take it) until
    `deadline` (BUSY_SECONDS from now by default), then the call fails as the runtime being
    unreachable does."""
    deadline = time.monotonic() + BUSY_SECONDS if deadline is None else deadline
    while True:
        try:
            return await connect(url, open_timeout=10)
        except InvalidStatus as exc:
            busy = exc.response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
            if not busy or time.monotonic() >= deadline:
                raise TelephonyError(
                    f"voice runtime {'busy' if busy else 'refused the call'} at {url}: {exc}"
                ) from exc
        except (OSError, TimeoutError, InvalidURI, InvalidHandshake) as exc:
            raise TelephonyError(f"voice runtime unreachable at {url}: {exc}") from exc
        await asyncio.sleep(BUSY_RETRY_SECONDS)


async def run_contact(url: str, session: ContactSession) -> ContactResult:
    """Answer as the contact on the runtime's Media Streams `url` and play the script to its end.

    Ends when the contact hangs up, when the runtime closes the connection, or after
    `session.max_seconds`. A runtime at its call limit closes the stream with 1013 after reading
    its start (it has checked the call's token by then): the line is busy, and the contact dials
    again as for a 503, from the start of its script, for up to BUSY_SECONDS in all. A runtime
    that cannot be reached, or stays busy, raises `TelephonyError`.
    """
    if session.script in NEVER_CONNECTS:
        raise ValueError(f"a {session.script} contact never answers")
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        ws = await dial(url, deadline)
        stream = _Stream(ws, session)
        async with ws:
            ended_by = await stream.run()
        if ended_by != "runtime" or ws.close_code != TRY_AGAIN_LATER:
            return stream.result(ended_by)
        if time.monotonic() >= deadline:
            raise TelephonyError(
                f"voice runtime busy at {url}: the stream was closed with "
                f"{TRY_AGAIN_LATER} (try again later) for {BUSY_SECONDS:g} s"
            )
        await asyncio.sleep(BUSY_RETRY_SECONDS)
