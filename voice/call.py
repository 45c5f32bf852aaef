"""One call's conversation on Pipecat: the carrier's Media Streams audio in, turn detection, the
agent's transcriber, LLM and voice, audio out; and, when it ends, the call's record.

The stream's `start` message names the call (`customParameters`: call_id, sub_account_id, a token
signed with the key pepper, answered_by); the runtime loads the call and its agent, builds one
pipeline, and ends the call with a reason (CONTRACT 6, 9):

- customer_hangup: the carrier's stream stopped or closed;
- agent_hangup: the model called the built-in `end_call` tool;
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import asyncpg
from pipecat.adapters.schemas.function_schema import FunctionSchema
from pipecat.adapters.schemas.tools_schema import ToolsSchema
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import (
    EndFrame,
    EndWorkerFrame,
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    LLMContextFrame,
    LLMMessagesAppendFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.audio.audio_buffer_processor import AudioBufferProcessor
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.services.llm_service import FunctionCallParams
from pipecat.transports.websocket.fastapi import (
    FastAPIWebsocketParams,
    FastAPIWebsocketTransport,
)
from pipecat.turns.user_stop.speech_timeout_user_turn_stop_strategy import (
    SpeechTimeoutUserTurnStopStrategy,
)
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner
from starlette.websockets import WebSocket

from api.calls import service as calls
from integrations.telephony import CallState
from tenancy.call_tokens import token_valid
from tenancy.scope import TenantScope
from tenancy.settings import Settings
from voice.vendors import AgentVoice, VendorMissing, llm_service, stt_service, tts_service

log = logging.getLogger("switchboard.voice")

SILENCES_BEFORE_HANGUP = 3
FOLLOW_UP = ("The contact has been silent for a while. Ask them briefly, in one short sentence, "
             "whether they are still there.")
END_CALL = FunctionSchema(
    name="end_call",
    description="Hang up the phone call. Use it once the conversation has come to an end.",
    properties={}, required=[])
PIPELINE_RATE = 16000
FRAME_SECONDS = 0.02
SILENT_FRAME = bytes(int(PIPELINE_RATE * FRAME_SECONDS) * 2)
LAST_WORDS_SECONDS = 5.0  # how long the transcriber gets for words said while hanging up
# Pipecat gates speech on loudness integrated over a rolling 400 ms window (BS.1770), which a
# one-word answer on the phone ("Hello?", "Yes.") does not fill: it would never start a turn.
# Silero's confidence alone decides (docs/decisions.md).
VAD_MIN_VOLUME = 0.0

SELECT_SCHEMA = ("SELECT schema_name FROM control.sub_accounts "
                 "WHERE id = $1 AND status = 'active'")



@dataclass(frozen=True)
class StreamStart:
    stream_sid: str
    call_sid: str
    account_sid: str
    parameters: dict[str, str]


async def read_start(websocket: WebSocket) -> StreamStart | None:
    """The Media Streams `connected` and `start` messages; None when the stream ends first."""
    for _ in range(10):
        message = json.loads(await websocket.receive_text())
        event = message.get("event")
        if event == "start":
            start = message.get("start") or {}
            parameters = start.get("customParameters") or {}
            return StreamStart(str(message.get("streamSid") or start.get("streamSid")),
                               str(start.get("callSid", "")), str(start.get("accountSid", "")),
                               {str(k): str(v) for k, v in parameters.items()})
        if event == "stop":
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
    hung_up: bool = False
    turn_done: asyncio.Event = field(default_factory=asyncio.Event)

    def since_answer(self, moment: float | None = None) -> float:
        return round((moment or time.monotonic()) - self.answered_at, 2)

    def end(self, reason: str, error: str | None = None) -> None:
        if self.ended_reason is None:
            self.ended_reason = reason
            self.error = error

    def add(self, role: str, text: str | None, started: float | None) -> None:
        if text and text.strip():
            self.messages.append({"role": role, "text": text.strip(),
                                  "start_seconds": self.since_answer(started)})

    def transcript(self) -> str:
        names = {"agent": "Agent", "contact": "Contact"}
        return "\n".join(f"{names[m['role']]}: {m['text']}" for m in self.messages)


class FirstMessage(FrameProcessor):
    """Speaks the agent's first_message in place of the model's first reply."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text: str | None = text

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if self._text is not None and isinstance(frame, LLMContextFrame):
            text, self._text = self._text, None
            await self.push_frame(TTSSpeakFrame(text), direction)
            return
        await self.push_frame(frame, direction)


def _wav(pcm: bytes, sample_rate: int, channels: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(2)
        writer.setframerate(sample_rate)
        writer.writeframes(pcm)
    return out.getvalue()


class CallRuntime:
    """Runs calls for one `switchboard voice` process."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool) -> None:
        self.settings = settings
        self.pool = pool
        self.active: set[asyncio.Task[Any]] = set()

    async def handle(self, websocket: WebSocket) -> None:
        start = await read_start(websocket)
        if start is None:
            return
        call_id = start.parameters.get("call_id", "")
        sub_account_id = start.parameters.get("sub_account_id", "")
        token = start.parameters.get("token", "")
        if not token_valid(self.settings, sub_account_id, call_id, token):
            log.warning("media stream refused: bad token for call %s", call_id[:40])
            await websocket.close(code=1008)
            return
        tenant = uuid.UUID(sub_account_id)
        schema = await self.pool.fetchval(SELECT_SCHEMA, tenant)
        if schema is None:
            await websocket.close(code=1008)
            return
        answered_by = start.parameters.get("answered_by") or "unknown"
        if answered_by not in ("human", "machine", "unknown"):
            answered_by = "unknown"
        answered = await calls.answer_call(TenantScope(self.pool, tenant, schema),
                                           uuid.UUID(call_id), answered_by)
        if answered is None:
            await websocket.close(code=1008)
            return
        call, keys = answered
        conversation = Conversation()
        try:
            await self._converse(websocket, start, call, keys, answered_by, conversation)
        except VendorMissing as exc:
            conversation.end("failed", str(exc))
        except Exception as exc:  # the call must still end with a record
            log.exception("call %s failed in the runtime", call_id)
            conversation.end("failed", f"runtime_error: {type(exc).__name__}")
        finally:
            await self._finish(tenant, schema, uuid.UUID(call_id), call, answered_by,
                               conversation)

    async def _converse(self, websocket: WebSocket, start: StreamStart, call: asyncpg.Record,
                        keys: dict[str, str], answered_by: str,
                        conversation: Conversation) -> None:
        if answered_by == "machine" and call["voicemail_detection"] \
                and call["voicemail_type"] == "hangup":
            conversation.end("voicemail")
            await websocket.close()
            return
        agent = AgentVoice(call["llm_model"], float(call["temperature"]), call["prompt"] or "",
                           call["language"], call["voice_id"], call["transcriber"])
        async with aiohttp.ClientSession() as http:
            llm = llm_service(self.settings, agent, keys)
            stt = stt_service(self.settings, agent, keys)
            tts = tts_service(self.settings, agent, keys, http)
            await self._run_pipeline(websocket, start, call, llm, stt, tts, conversation)

    async def _run_pipeline(self, websocket: WebSocket, start: StreamStart,
                            call: asyncpg.Record, llm: Any, stt: Any, tts: Any,
                            conversation: Conversation) -> None:
        serializer = TwilioFrameSerializer(
            start.stream_sid, params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
        transport = FastAPIWebsocketTransport(websocket=websocket, params=FastAPIWebsocketParams(
            audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False,
            serializer=serializer))
        pause = float(call["voice_activity_timeout"]) / 1000
        context = LLMContext(tools=ToolsSchema(standard_tools=[END_CALL]))
        user, assistant = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(
            # A pause of voice_activity_timeout ends the contact's speech and, with it, the turn:
            # one transcription per finished turn (CONTRACT 9).
            vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=pause,
                                                            min_volume=VAD_MIN_VOLUME)),
            user_idle_timeout=float(call["silence_timeout"]),
            user_turn_strategies=UserTurnStrategies(
                stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.0)])))
        recorder = AudioBufferProcessor(num_channels=1)
        stages: list[Any] = [transport.input(), stt, user]
        if call["first_message"]:
            stages.append(FirstMessage(call["first_message"]))
        stages += [llm, tts, transport.output(), recorder, assistant]
        worker = PipelineWorker(
            Pipeline(stages),
            params=PipelineParams(audio_in_sample_rate=PIPELINE_RATE,
                                  audio_out_sample_rate=PIPELINE_RATE),
            idle_timeout_secs=None)

        async def end_call(params: FunctionCallParams) -> None:
            conversation.end("agent_hangup")
            await params.result_callback({"status": "ending the call"})
            await params.llm.push_frame(EndWorkerFrame(), FrameDirection.UPSTREAM)

        llm.register_function("end_call", end_call)

        async def on_turn_started(_aggregator: Any, _strategy: Any) -> None:
            conversation.silences = 0
            conversation.contact_speaking = True
            conversation.turn_done.clear()
            conversation.turn_started = time.monotonic()
        user.add_event_handler("on_user_turn_started", on_turn_started)

        async def on_turn_stopped(_aggregator: Any, _strategy: Any, message: Any) -> None:
            conversation.contact_speaking = False
            conversation.add("contact", message.content, conversation.turn_started)
            conversation.turn_done.set()
        user.add_event_handler("on_user_turn_stopped", on_turn_stopped)

        async def on_agent_started(_aggregator: Any, *_: Any) -> None:
            conversation.agent_started = time.monotonic()
        assistant.add_event_handler("on_assistant_turn_started", on_agent_started)

        async def on_agent_stopped(_aggregator: Any, message: Any) -> None:
            if not conversation.hung_up:  # a reply to words said as the contact hung up
                conversation.add("agent", message.content, conversation.agent_started)
        assistant.add_event_handler("on_assistant_turn_stopped", on_agent_stopped)

        async def on_idle(aggregator: Any) -> None:
            conversation.silences += 1
            if conversation.silences >= SILENCES_BEFORE_HANGUP:
                conversation.end("silence_timeout")
                await worker.queue_frame(EndFrame())
                return
            await aggregator.push_frame(LLMMessagesAppendFrame(
                [{"role": "system", "content": FOLLOW_UP}], run_llm=True))
        user.add_event_handler("on_user_turn_idle", on_idle)

        async def on_disconnected(_transport: Any, _client: Any) -> None:
            conversation.end("customer_hangup")
            if conversation.contact_speaking:
                # The contact's last words, said as they hung up: the line is silent from now
                # on, so the turn ends (and is transcribed) as it would have on the call.
                for _ in range(int((pause + 0.2) / FRAME_SECONDS)):
                    await worker.queue_frame(InputAudioRawFrame(
                        SILENT_FRAME, sample_rate=PIPELINE_RATE, num_channels=1))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(conversation.turn_done.wait(),
                                           pause + LAST_WORDS_SECONDS)
            conversation.hung_up = True
            await worker.cancel()
        transport.add_event_handler("on_client_disconnected", on_disconnected)

        async def on_error(_worker: Any, frame: ErrorFrame) -> None:
            kind = "llm_error" if "llm" in str(frame.processor).lower() else "speech_error"
            text = str(frame.error)
            conversation.end("failed", text if ":" in text[:20] else f"{kind}: {text}"[:500])
            await worker.cancel()
        worker.add_event_handler("on_pipeline_error", on_error)

        async def on_audio(_buffer: Any, audio: bytes, sample_rate: int, channels: int) -> None:
            if audio:
                conversation.recording = _wav(audio, sample_rate, channels)
        recorder.add_event_handler("on_audio_data", on_audio)

        async def limit() -> None:
            await asyncio.sleep(float(call["max_duration"]) * 60)
            conversation.end("max_duration")
            await worker.queue_frame(EndFrame())

        limiter = asyncio.create_task(limit())
        if call["recording"]:
            await recorder.start_recording()  # type: ignore[no-untyped-call]
        try:
            runner = WorkerRunner(handle_sigint=False)
            await runner.add_workers(worker)
            await runner.run()
        finally:
            limiter.cancel()
            if call["recording"]:
                await recorder.stop_recording()  # type: ignore[no-untyped-call]

    async def _finish(self, tenant: uuid.UUID, schema: str, call_id: uuid.UUID,
                      call: asyncpg.Record | None, answered_by: str,
                      conversation: Conversation) -> None:
        conversation.end("customer_hangup")
        reason = conversation.ended_reason or "customer_hangup"
        ended = datetime.now(UTC)
        duration = max(1, round(time.monotonic() - conversation.answered_at))
        state = CallState(
            "failed" if reason in ("failed", "no_answer", "busy") else "completed",
            started_at=conversation.answered_wall, ended_at=ended,
            duration_seconds=duration, transcript=conversation.transcript() or None,
            error=conversation.error, ended_reason=reason, answered_by=answered_by,
            messages=conversation.messages, recording=conversation.recording)
        await calls.finish_call(TenantScope(self.pool, tenant, schema), call_id, state)
