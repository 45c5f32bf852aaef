"""One call's conversation on Pipecat: the carrier's Media Streams audio in, turn detection, the
agent's transcriber, LLM and voice, audio out; and, when it ends, the call's record.

The stream's `start` message names the call (`customParameters`: call_id, sub_account_id, a token
signed with the key pepper, answered_by); the runtime loads the call and its agent, builds one
pipeline, and ends the call with a reason (CONTRACT 6, 9):

- customer_hangup: the carrier's stream stopped or closed;
- agent_hangup: the model called the built-in `end_call` tool;
- transferred: the model's transfer_call tool handed the contact to a number (voice/tools.py);
- silence_timeout: a third silence of silence_timeout seconds (the first two get a follow-up);
- max_duration: the agent's max_duration passed;
- voicemail: an answering machine reached an agent with voicemail detection on;
- failed: a vendor failed (llm_error, speech_error) or was never connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import time
import uuid
import wave
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.audio.mixers.soundfile_mixer import SoundfileMixer
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import (
    BotStoppedSpeakingFrame,
    EndFrame,
    ErrorFrame,
    InputAudioRawFrame,
    LLMMessagesAppendFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.processors.audio.audio_buffer_processor import AudioBufferProcessor
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams
from pipecat.turns.user_stop.speech_timeout_user_turn_stop_strategy import (
    SpeechTimeoutUserTurnStopStrategy,
)
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner
from starlette.websockets import WebSocket, WebSocketDisconnect

from api.calls import service as calls
from integrations.telephony import CallState
from tenancy.call_tokens import token_valid
from tenancy.scope import TenantScope
from tenancy.settings import Settings
from voice import metrics
from voice.agent import AgentConfig
from voice.metrics import ResponseTimer
from voice.processors import AfterHangUp, Backchannel, FirstMessage, VoicemailMessage
from voice.silero import SharedSileroVAD
from voice.tools import MESSAGE_SECONDS, CallFacts, CallTools, FunctionEntry
from voice.transport import MediaStreamSerializer, MediaStreamTransport
from voice.vendors import VendorClients, VendorMissing, llm_service, stt_service, tts_service

log = logging.getLogger("switchboard.voice")

SILENCES_BEFORE_HANGUP = 3
FOLLOW_UP = (
    "The contact has been silent for a while. Ask them briefly, in one short sentence, "
    "whether they are still there."
)
# The telephone's own rate: no resampling of the carrier's audio, Silero runs at 8 kHz.
PIPELINE_RATE = 8000
FRAME_SECONDS = 0.02
SILENT_FRAME = bytes(int(PIPELINE_RATE * FRAME_SECONDS) * 2)
LAST_WORDS_SECONDS = 5.0
# Admission (CONTRACT 11, 11a). A connection names its call, a `start` whose token we signed,
# within AUTH_SECONDS of its WebSocket handshake, or it is closed with 1008; nothing else it
# sends extends that. Only then does it count against SWITCHBOARD_VOICE_MAX_CALLS.
AUTH_SECONDS = 5.0
# Messages a connection may send before its `start` (Twilio sends one, `connected`).
START_MESSAGES = 10
# Connections that have not named a call yet, at most: one more closes the oldest of them
# (1013), so they cannot exhaust memory or descriptors, nor keep a carrier's new stream out.
MAX_PENDING_STREAMS = 200
POLICY_VIOLATION = 1008  # not a call of ours (or not named in time)
TRY_AGAIN_LATER = 1013  # a call of ours, at the call limit: the carrier dials again
# The background beds (scripts/make_ambience.py), mixed at this share under the agent's voice.
AMBIENCE = {path.stem: path for path in (Path(__file__).parent / "ambience").glob("*.wav")}
AMBIENCE_VOLUME = 0.3  # how long the transcriber gets for words said while hanging up
# How long the call's record waits for a tool still running when the call ended.
TOOLS_SETTLE_SECONDS = 25.0
# Pipecat gates speech on loudness integrated over a rolling 400 ms window (BS.1770), which a
# one-word answer on the phone ("Hello?", "Yes.") does not fill: it would never start a turn.
# Silero's confidence alone decides (docs/decisions.md).
VAD_MIN_VOLUME = 0.0

SELECT_SCHEMA = "SELECT schema_name FROM control.sub_accounts WHERE id = $1 AND status = 'active'"


@dataclass(frozen=True)
class StreamStart:
    stream_sid: str
    call_sid: str
    account_sid: str
    parameters: dict[str, str]


async def read_start(websocket: WebSocket) -> StreamStart | None:
    """The Media Streams `connected` and `start` messages; None when the stream ends first, or
    when what arrives is not Media Streams (the connection is then refused, not an error). The
    caller bounds how long this may take (AUTH_SECONDS)."""
    try:
        for _ in range(START_MESSAGES):
            message = json.loads(await websocket.receive_text())
            event = message.get("event")
            if event == "start":
                start = message.get("start") or {}
                parameters = start.get("customParameters") or {}
                return StreamStart(
                    str(message.get("streamSid") or start.get("streamSid")),
                    str(start.get("callSid", "")),
                    str(start.get("accountSid", "")),
                    {str(k): str(v) for k, v in parameters.items()},
                )
            if event == "stop":
                return None
    except (WebSocketDisconnect, ValueError, KeyError, TypeError, AttributeError, RuntimeError):
        return None
    return None


@dataclass
class Conversation:
    """What happened on the call, as it happens."""

    answered_at: float = field(default_factory=time.monotonic)
    answered_wall: datetime = field(default_factory=lambda: datetime.now(UTC))
    messages: list[dict[str, Any]] = field(default_factory=list)
    ended_reason: str | None = None
    error: str | None = None
    silences: int = 0
    turn_started: float | None = None
    agent_started: float | None = None
    recording: bytes | None = None
    contact_speaking: bool = False
    line_closed: bool = False  # the contact hung up
    hung_up: bool = False  # ... and their last words are in
    turn_done: asyncio.Event = field(default_factory=asyncio.Event)

    def since_answer(self, moment: float | None = None) -> float:
        return round((moment or time.monotonic()) - self.answered_at, 2)

    def end(self, reason: str, error: str | None = None) -> None:
        if self.ended_reason is None:
            self.ended_reason = reason
            self.error = error

    def add(self, role: str, text: str | None, started: float | None) -> None:
        if text and text.strip():
            self.messages.append(
                {"role": role, "text": text.strip(), "start_seconds": self.since_answer(started)}
            )

    def transcript(self) -> str:
        names = {"agent": "Agent", "contact": "Contact"}
        return "\n".join(f"{names[m['role']]}: {m['text']}" for m in self.messages)


def _wav(pcm: bytes, sample_rate: int, channels: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(2)
        writer.setframerate(sample_rate)
        writer.writeframes(pcm)
    return out.getvalue()


class CallRuntime:
    """Runs calls for one `switchboard voice` process.

    A connection is first *pending*: it has AUTH_SECONDS from its handshake to send a `start`
    whose token we signed (at most MAX_PENDING_STREAMS wait at once; one more closes the oldest
    with 1013). Only a stream that named one of our calls takes a place among
    SWITCHBOARD_VOICE_MAX_CALLS (`active`); at the limit it is closed with 1013 and its call is
    left (or put back) `queued` while the carrier dials again. The call becomes `in_progress`
    only once its stream has its place (`answer_call`)."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool) -> None:
        self.settings = settings
        self.pool = pool
        # The process's connections to the vendors, shared by its calls.
        self.vendors = VendorClients()
        self.active: set[object] = set()
        self._pending: dict[object, asyncio.Timeout] = {}
        self._evicted: set[object] = set()

    async def close(self) -> None:
        """The runtime stops: its vendor connections are closed."""
        await self.vendors.aclose()

    def full(self) -> bool:
        """This process runs SWITCHBOARD_VOICE_MAX_CALLS calls (of streams that named a call)."""
        return len(self.active) >= self.settings.voice_max_calls

    @property
    def pending(self) -> int:
        """Connections that have not yet named a call."""
        return len(self._pending)

    async def handle(self, websocket: WebSocket) -> None:
        """One media stream, from its WebSocket handshake (not yet accepted) to the call's end."""
        named = await self._named_call(websocket)
        if not isinstance(named, StreamStart):
            metrics.call_ended("refused")
            await _close(websocket, named)
            return
        start = named
        tenant = uuid.UUID(start.parameters["sub_account_id"])
        call_id = uuid.UUID(start.parameters["call_id"])
        if self.full():
            metrics.STREAMS_BUSY.inc()
            await self._keep_queued(tenant, call_id)
            await _close(websocket, TRY_AGAIN_LATER)
            return
        place = object()
        self.active.add(place)  # no await since full(): no race past the limit
        metrics.CALLS_ACTIVE.inc()
        try:
            await self._take_call(websocket, start, tenant, call_id)
        finally:  # the place is free once the call's record is written
            metrics.CALLS_ACTIVE.dec()
            self.active.discard(place)

    async def _named_call(self, websocket: WebSocket) -> StreamStart | int:
        """The stream's start once it names a call by a token we signed, within AUTH_SECONDS of
        the handshake; else the code to close the connection with."""
        key = object()
        start: StreamStart | None = None
        try:
            async with asyncio.timeout(AUTH_SECONDS) as limit:
                self._make_room()
                self._pending[key] = limit
                metrics.STREAMS_PENDING.set(len(self._pending))
                try:
                    await websocket.accept()
                    start = await read_start(websocket)
                finally:
                    self._pending.pop(key, None)
                    metrics.STREAMS_PENDING.set(len(self._pending))
        except TimeoutError:
            if key in self._evicted:
                self._evicted.discard(key)
                return TRY_AGAIN_LATER
            log.debug("media stream closed: no call named within %s s", AUTH_SECONDS)
            return POLICY_VIOLATION
        self._evicted.discard(key)  # evicted too late to matter: it named its call first
        if start is None:
            return POLICY_VIOLATION
        call_id = start.parameters.get("call_id", "")
        sub_account_id = start.parameters.get("sub_account_id", "")
        if not token_valid(
            self.settings, sub_account_id, call_id, start.parameters.get("token", "")
        ):
            log.warning("media stream refused: bad token for call %s", call_id[:40])
            return POLICY_VIOLATION
        try:  # the token signed them: UUIDs of ours
            uuid.UUID(sub_account_id), uuid.UUID(call_id)
        except ValueError:
            return POLICY_VIOLATION
        return start

    def _make_room(self) -> None:
        """At MAX_PENDING_STREAMS, the oldest pending connection is closed (its timeout made
        due now): a flood of connections that never name a call cannot keep a new one out,
        which a carrier names within milliseconds."""
        while len(self._pending) >= MAX_PENDING_STREAMS:
            oldest = next(iter(self._pending))
            limit = self._pending.pop(oldest)
            self._evicted.add(oldest)
            metrics.STREAMS_EVICTED.inc()
            with contextlib.suppress(RuntimeError):  # already expiring
                limit.reschedule(asyncio.get_running_loop().time())

    async def _keep_queued(self, tenant: uuid.UUID, call_id: uuid.UUID) -> None:
        """The call of a stream refused at the call limit stays `queued` (a placed call goes
        back to it) while its carrier dials again (CONTRACT 11)."""
        try:
            schema = await self.pool.fetchval(SELECT_SCHEMA, tenant)
            if schema is not None:
                await calls.wait_for_runtime(TenantScope(self.pool, tenant, schema), call_id)
        except Exception:  # the refusal stands; the status follows at the next attempt
            log.exception("call %s: could not mark it queued after a refused stream", call_id)

    async def _take_call(
        self, websocket: WebSocket, start: StreamStart, tenant: uuid.UUID, call_id: uuid.UUID
    ) -> None:
        await CallSession(
            self.settings, self.pool, self.vendors, websocket, start, tenant, call_id
        ).take()


class CallSession:
    """One call this process took, from its answer to its record: the pipeline of the agent's
    vendors, and one method per thing that happens on it (the contact's turn, the agent's, a
    silence, the model's end_call, the contact hanging up, a vendor's error, the end).

    The model's functions are registered in one place, `functions`."""

    # Set once the call is answered, for the rest of it.
    answered_by: str
    conversation: Conversation
    agent: AgentConfig
    tools: CallTools | None = None
    spoken: asyncio.Event
    # Set when the pipeline is built; the event methods run only after.
    worker: PipelineWorker
    user: LLMUserAggregator
    first: FirstMessage | None = None

    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        vendors: VendorClients,
        websocket: WebSocket,
        start: StreamStart,
        tenant: uuid.UUID,
        call_id: uuid.UUID,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.vendors = vendors
        self.websocket = websocket
        self.start = start
        self.tenant = tenant
        self.call_id = call_id

    async def take(self) -> None:
        """Answer, converse and record the call; a call not waiting for the runtime, or of an
        inactive sub-account, is refused (1008)."""
        answered = await self.answer()
        if answered is None:
            metrics.call_ended("refused")
            await _close(self.websocket, POLICY_VIOLATION)
            return
        scope, answered_call = answered
        try:
            await self.converse(scope, answered_call)
        except VendorMissing as exc:
            self.conversation.end("failed", str(exc))
        except Exception as exc:  # the call must still end with a record
            log.exception("call %s failed in the runtime", self.call_id)
            self.conversation.end("failed", f"runtime_error: {type(exc).__name__}")
        finally:
            with contextlib.suppress(Exception):  # hang up the line (it may be gone already)
                await self.websocket.close()
            await self.finish(scope)

    async def answer(self) -> tuple[TenantScope, calls.AnsweredCall] | None:
        """Mark the call answered (`in_progress`, answered_by): the sub-account's scope and the
        call (with its agent's fields, rendered instructions and tools, and the sub-account's
        vendor keys). None when the call is not waiting for the runtime or its sub-account is
        not active."""
        schema = await self.pool.fetchval(SELECT_SCHEMA, self.tenant)
        if schema is None:
            return None
        answered_by = self.start.parameters.get("answered_by") or "unknown"
        if answered_by not in ("human", "machine", "unknown"):
            answered_by = "unknown"
        scope = TenantScope(self.pool, self.tenant, schema)
        answered = await calls.answer_call(scope, self.call_id, answered_by)
        if answered is None:
            return None
        self.answered_by = answered_by
        self.conversation = Conversation()
        return scope, answered

    async def converse(self, scope: TenantScope, answered: calls.AnsweredCall) -> None:
        """Through the agent's vendors until the call ends. An answering machine, with
        voicemail detection on, is hung up on or gets the voicemail_message."""
        record, keys = answered.record, answered.keys
        # The agent's fields, read once; its prompt and first message with the call's context
        # filled in (CONTRACT 10).
        self.agent = replace(
            AgentConfig.from_record(record),
            prompt=answered.prompt,
            first_message=answered.first_message,
        )
        self.spoken = asyncio.Event()
        self.tools = CallTools(
            self.settings,
            CallFacts(
                scope,
                self.call_id,
                record["agent_id"],
                record["contact_id"],
                record["provider"],
                record["provider_call_id"],
            ),
            answered.tools,
            say=self.say,
            leave=self.leave,
        )
        machine = self.answered_by == "machine" and self.agent.voicemail_detection
        if machine and self.agent.voicemail_type == "hangup":
            self.conversation.end("voicemail")
            await self.websocket.close()
            return
        tts = tts_service(self.settings, self.agent, keys, self.vendors)
        if machine:
            await self.leave_message(tts)
            return
        llm = llm_service(self.settings, self.agent, keys, self.vendors)
        stt = stt_service(self.settings, self.agent, keys, self.vendors)
        await self.talk(llm, stt, tts)

    def functions(self) -> list[FunctionEntry]:
        """The functions the model is offered, each with what runs when it calls one and how
        long the model waits for it: every tool of the call is registered here (CONTRACT 9:
        the built-in end_call; CONTRACT 10: the agent's tools, voice/tools.py)."""
        assert self.tools is not None
        return self.tools.functions()

    async def leave_message(self, tts: Any) -> None:
        """An answering machine: the voicemail_message after its beep, then hang up."""
        await self.run(
            [VoicemailMessage(self.agent.voicemail_message, self.on_voicemail_left), tts]
        )

    async def talk(self, llm: Any, stt: Any, tts: Any) -> None:
        """The conversation: the contact's turns transcribed, answered by the model, spoken."""
        functions = self.functions()
        for schema, handler, wait in functions:
            llm.register_function(schema.name, handler, timeout_secs=wait)
        context = LLMContext(tools=ToolsSchema(standard_tools=[f[0] for f in functions]))
        self.user, assistant = self.aggregators(context)
        if self.agent.first_message:
            self.first = FirstMessage(self.agent.first_message)
        stages: list[Any] = []
        if self.agent.backchanneling:
            stages.append(Backchannel(turn_end_seconds=self.agent.turn_end_seconds))
        stages += [
            stt,
            self.user,
            ResponseTimer(str(self.call_id)),
            *([self.first] if self.first else []),
            AfterHangUp(lambda: self.conversation.line_closed),
            llm,
            tts,
        ]
        opener = asyncio.create_task(self.silent_from_the_answer())
        try:
            await self.run(stages, after=[assistant], errors=True)
        finally:
            opener.cancel()

    def aggregators(self, context: LLMContext) -> tuple[LLMUserAggregator, Any]:
        """The contact's side of the context (their turns, found by Silero) and the agent's,
        each event of theirs sent to its method here."""
        # A pause of voice_activity_timeout ends the contact's speech and, with it, the turn:
        # one transcription per finished turn (CONTRACT 9). The process's one Silero session
        # (built off the loop when the runtime started).
        vad = SharedSileroVAD(
            params=VADParams(stop_secs=self.agent.turn_end_seconds, min_volume=VAD_MIN_VOLUME)
        )
        user, assistant = LLMContextAggregatorPair(
            context,
            user_params=LLMUserAggregatorParams(
                vad_analyzer=vad,
                user_idle_timeout=self.agent.silence_seconds,
                user_turn_strategies=UserTurnStrategies(
                    stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.0)]
                ),
            ),
        )
        user.add_event_handler("on_user_turn_started", self.on_turn_started)
        user.add_event_handler("on_user_turn_stopped", self.on_turn_stopped)
        user.add_event_handler("on_user_turn_idle", self.on_silence)
        assistant.add_event_handler("on_assistant_turn_started", self.on_agent_started)
        assistant.add_event_handler("on_assistant_turn_stopped", self.on_agent_stopped)
        return user, assistant

    async def run(
        self, stages: list[Any], after: list[Any] | None = None, errors: bool = False
    ) -> None:
        """The call's pipeline, run to its end: the line in, `stages`, the line out (the
        agent's background bed mixed in), the recorder, `after`; ended by max_duration, the
        contact hanging up, and with `errors`, a vendor's error."""
        transport = _transport(self.websocket, self.start, self.agent)
        recorder = AudioBufferProcessor(num_channels=1)
        self.worker = _worker(
            [transport.input(), *stages, transport.output(), recorder, *(after or [])]
        )
        transport.add_event_handler("on_client_disconnected", self.on_hang_up)
        self.worker.add_reached_downstream_filter((BotStoppedSpeakingFrame,))
        self.worker.add_event_handler("on_frame_reached_downstream", self.on_agent_quiet)
        recorder.add_event_handler("on_audio_data", self.on_recording)
        if errors:
            self.worker.add_event_handler("on_pipeline_error", self.on_vendor_error)
        limiter = asyncio.create_task(self.max_duration())
        if self.agent.recording:
            await recorder.start_recording()  # type: ignore[no-untyped-call]
        try:
            runner = WorkerRunner(handle_sigint=False)
            await runner.add_workers(self.worker)
            await runner.run()
        finally:
            limiter.cancel()
            if self.agent.recording:
                await recorder.stop_recording()  # type: ignore[no-untyped-call]

    # --- what happens on the call -----------------------------------------------------------

    async def on_turn_started(self, _aggregator: Any, _strategy: Any) -> None:
        """The contact started to speak: the silences count from zero again."""
        self.conversation.silences = 0
        self.conversation.contact_speaking = True
        self.conversation.turn_done.clear()
        self.conversation.turn_started = time.monotonic()

    async def on_turn_stopped(self, _aggregator: Any, _strategy: Any, message: Any) -> None:
        """The contact's turn ended: what they said, transcribed."""
        self.conversation.contact_speaking = False
        self.conversation.add("contact", message.content, self.conversation.turn_started)
        self.conversation.turn_done.set()

    async def on_agent_started(self, _aggregator: Any, *_: Any) -> None:
        self.conversation.agent_started = time.monotonic()

    async def on_agent_stopped(self, _aggregator: Any, message: Any) -> None:
        if not self.conversation.hung_up:  # a reply to words said as the contact hung up
            self.conversation.add("agent", message.content, self.conversation.agent_started)

    async def on_silence(self, _aggregator: Any) -> None:
        """silence_timeout seconds of silence: the agent opens with its first_message if it has
        not, else asks the model for a follow-up; the third silence ends the call."""
        self.conversation.silences += 1
        if self.conversation.silences >= SILENCES_BEFORE_HANGUP:
            self.conversation.end("silence_timeout")
            await self.worker.queue_frame(EndFrame())
            return
        opening = self.first.take() if self.first else None
        if opening:  # nobody has spoken yet: the agent opens with its first message
            await self.worker.queue_frame(TTSSpeakFrame(opening))
            return
        await self.user.push_frame(
            LLMMessagesAppendFrame([{"role": "system", "content": FOLLOW_UP}], run_llm=True)
        )

    async def silent_from_the_answer(self) -> None:
        # Pipecat's idle timer runs from the agent's last words; a line silent from the answer
        # on counts as a silence too.
        await asyncio.sleep(self.agent.silence_seconds)
        if self.conversation.turn_started is None and self.conversation.agent_started is None:
            await self.on_silence(self.user)

    async def on_agent_quiet(self, _worker: Any, _frame: Any) -> None:
        """The agent stopped speaking (its audio played out)."""
        self.spoken.set()

    async def say(self, text: str) -> None:
        """A tool's sentence (a transfer's message), spoken: returns once it has been played
        (or after tools.MESSAGE_SECONDS)."""
        self.spoken.clear()
        self.conversation.add("agent", text, time.monotonic())
        await self.worker.queue_frame(TTSSpeakFrame(text))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.spoken.wait(), MESSAGE_SECONDS)

    async def leave(self, reason: str) -> None:
        """A tool ends the call: agent_hangup (end_call), transferred (transfer_call)."""
        self.conversation.end(reason)

    async def on_voicemail_left(self, message: str) -> None:
        """The voicemail_message is on its way: the call ends once it has been played."""
        self.conversation.add("agent", message, time.monotonic())
        self.conversation.end("voicemail")
        await self.worker.queue_frame(EndFrame())

    async def on_hang_up(self, _transport: Any, _client: Any) -> None:
        """The carrier's stream stopped or closed: customer_hangup."""
        self.conversation.end("customer_hangup")
        self.conversation.line_closed = True
        if self.conversation.contact_speaking:
            # The contact's last words, said as they hung up: the line is silent from now on,
            # so the turn ends (and is transcribed) as it would have on the call.
            pause = self.agent.turn_end_seconds
            for _ in range(int((pause + 0.2) / FRAME_SECONDS)):
                await self.worker.queue_frame(
                    InputAudioRawFrame(SILENT_FRAME, sample_rate=PIPELINE_RATE, num_channels=1)
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.conversation.turn_done.wait(), pause + LAST_WORDS_SECONDS
                )
        self.conversation.hung_up = True
        await self.worker.cancel()

    async def on_vendor_error(self, _worker: Any, frame: ErrorFrame) -> None:
        """A vendor failed: the call ends `failed` with llm_error or speech_error."""
        kind = "llm_error" if "llm" in str(frame.processor).lower() else "speech_error"
        text = str(frame.error)
        self.conversation.end("failed", text if ":" in text[:20] else f"{kind}: {text}"[:500])
        await self.worker.cancel()

    async def max_duration(self) -> None:
        await asyncio.sleep(self.agent.max_duration_seconds)
        self.conversation.end("max_duration")
        await self.worker.queue_frame(EndFrame())

    async def on_recording(
        self, _buffer: Any, audio: bytes, sample_rate: int, channels: int
    ) -> None:
        if audio:
            self.conversation.recording = _wav(audio, sample_rate, channels)

    async def finish(self, scope: TenantScope) -> None:
        """The call's record: its outcome, messages and recording, charged (finish_call)."""
        conversation = self.conversation
        conversation.end("customer_hangup")
        reason = conversation.ended_reason or "customer_hangup"
        metrics.call_ended(reason)
        # The line's time (up to a transfer, the agent's part), not the wait for its tools.
        ended = datetime.now(UTC)
        duration = max(1, round(time.monotonic() - conversation.answered_at))
        if self.tools is not None:  # a tool's result that arrives after the hang-up is kept
            await self.tools.settle(TOOLS_SETTLE_SECONDS)
        state = CallState(
            "failed" if reason in ("failed", "no_answer", "busy") else "completed",
            started_at=conversation.answered_wall,
            ended_at=ended,
            duration_seconds=duration,
            transcript=conversation.transcript() or None,
            error=conversation.error,
            ended_reason=reason,
            answered_by=self.answered_by,
            messages=conversation.messages,
            recording=conversation.recording,
            tool_calls=list(self.tools.calls) if self.tools is not None else None,
            transferred_to=self.tools.transferred_to if self.tools is not None else None,
        )
        await calls.finish_call(scope, self.call_id, state)


async def _close(websocket: WebSocket, code: int) -> None:
    with contextlib.suppress(Exception):  # the connection may be gone already
        await websocket.close(code=code)


def _transport(
    websocket: WebSocket, start: StreamStart, agent: AgentConfig
) -> MediaStreamTransport:
    """The carrier's Media Streams connection, the agent's background bed mixed under its voice."""
    serializer = MediaStreamSerializer(
        start.stream_sid, params=TwilioFrameSerializer.InputParams(auto_hang_up=False)
    )
    mixer = None
    if agent.background in AMBIENCE:
        mixer = SoundfileMixer(
            sound_files={agent.background: str(AMBIENCE[agent.background])},
            default_sound=agent.background,
            volume=AMBIENCE_VOLUME,
        )
    return MediaStreamTransport(
        websocket,
        FastAPIWebsocketParams(
            audio_in_enabled=True,
            audio_out_enabled=True,
            add_wav_header=False,
            serializer=serializer,
            audio_out_mixer=mixer,
        ),
    )


def _worker(stages: list[Any]) -> PipelineWorker:
    # No RTVI (the protocol of Pipecat's client SDKs: a phone line has no such client) and no
    # turn-tracking observer (tracing): each watches every frame every stage pushes, through a
    # task and queue of its own (without them: 0.058 -> 0.046 cores per call at 10 calls,
    # bench/RESULTS.md). The response time is our own ResponseTimer.
    return PipelineWorker(
        Pipeline(stages),
        params=PipelineParams(
            audio_in_sample_rate=PIPELINE_RATE, audio_out_sample_rate=PIPELINE_RATE
        ),
        idle_timeout_secs=None,
        enable_rtvi=False,
        enable_turn_tracking=False,
    )
