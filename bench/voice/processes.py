"""The two helper processes of bench/voice, each started as `python -m bench.voice <role>`:

- `vendors`: the fake vendors (voice/fake_vendors) with fixed latencies, plus what the bench needs
  to see how much time the fakes themselves take beyond those latencies: every vendor request's
  handler time minus its configured latency (`GET /_bench/stats`, `POST /_bench/reset`) and the
  lag of this process's event loop. With `--tool-ms`, also the agents' http tool's target,
  `POST /_bench/tool`, answering after that long, and the moments of each tool call (`tools` in
  the stats, keyed by the tool's name and arguments): the fake LLM's end of streaming the call,
  the target's receipt of the runtime's POST and its answer, and the arrival of the first LLM
  request carrying the result.
- `contacts`: N sandbox contacts (integrations/telephony/sandbox_media.py) on the runtime's
  Media Streams WebSocket, each started at its own offset, in a process of their own so their
  CPU is not the runtime's. Writes, per call, the contact's lines, every agent chunk (arrival,
  duration, whether it holds speech) and the call's answer time on the system's monotonic clock
  (the same clock in every process), plus the lag of this process's event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

from integrations.telephony.sandbox_audio import SAMPLE_RATE
from integrations.telephony.sandbox_media import SPEECH_RMS, ContactSession, _Stream, dial
from voice.fake_vendors import FakeVendors, RecordedRequest
from voice.fake_vendors import audio as fake_audio
from voice.fake_vendors.server import RECORD, _encode, _split

TOOL_PATH = "/_bench/tool"


def tool_key(name: str, arguments: Any) -> str:
    """One tool call of a round: its tool's name and its arguments (which name the contact)."""
    return f"{name} {json.dumps(arguments, sort_keys=True)}"


def results_in(body: dict[str, Any]) -> list[str]:
    """The tool calls whose results an OpenAI-format chat request carries (tool_key each)."""
    answered = {
        m.get("tool_call_id") for m in body.get("messages") or [] if m.get("role") == "tool"
    }
    keys = []
    for message in body.get("messages") or []:
        for call in message.get("tool_calls") or []:
            if call.get("id") in answered:
                function = call.get("function") or {}
                arguments = json.loads(function.get("arguments") or "{}")
                keys.append(tool_key(function.get("name", ""), arguments))
    return keys


class LoopLag:
    """How late a 10 ms timer fires on this event loop: a loop busy with other work is late."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            self.samples.append(time.monotonic() - before - 0.01)

    def summary(self) -> dict[str, float]:
        if not self.samples:
            return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
        values = np.array(self.samples) * 1000
        return {
            "p50_ms": float(np.percentile(values, 50)),
            "p99_ms": float(np.percentile(values, 99)),
            "max_ms": float(values.max()),
        }


# --- the fake vendors ----------------------------------------------------------------------------


def _kind(path: str) -> str | None:
    if path.endswith(("/chat/completions", "/messages")) or "Content" in path:
        return "llm"
    if path.endswith(("/transcriptions", "/listen")):
        return "stt"
    if path.startswith("/_"):
        return None
    return "tts"


class TimedVendors(FakeVendors):
    """FakeVendors that also measure their own handler time beyond the configured latency.

    So that a vendor's latency is the configured one and not that plus the fake's own work, the
    work overlaps the configured wait: transcription runs in a thread during the STT latency,
    synthesis (deterministic, so cached by text and rate) during the TTS first-byte latency.
    Answers are the same as FakeVendors'; what time is left over is measured and reported.
    """

    def __init__(self, tool_ms: int = 0, **latency: Any) -> None:
        super().__init__(**latency)
        self.tool_ms = tool_ms
        # tool_key -> {"streamed", "received", "answered", "arrived"}: monotonic seconds.
        self.tools: dict[str, dict[str, float]] = {}
        self.overheads: dict[str, list[float]] = {"llm": [], "stt": [], "tts": []}
        # (kind, start, end) of every vendor request, on the monotonic clock.
        self.spans: list[tuple[str, float, float]] = []
        self.lag = LoopLag()
        self._speech: dict[tuple[str, int, str, str], list[bytes]] = {}

    async def _transcribe(self, record: RecordedRequest, samples: Any, rate: int) -> str:
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(None, self.phrases.recognise, samples, rate)
        await self._delay(self.config.stt_ms)
        record.answer = await work
        return record.answer

    async def _speak(
        self,
        request: web.Request,
        record: RecordedRequest,
        text: str,
        rate: int,
        encoding: str,
        container: str = "raw",
    ) -> web.StreamResponse:
        record.answer = text
        loop = asyncio.get_running_loop()

        def make() -> list[bytes]:
            key = (text, rate, encoding, container)
            if key not in self._speech:
                samples = fake_audio.synthesize(text, rate)
                data = (
                    fake_audio.wav(samples, rate)
                    if container == "wav"
                    else _encode(samples, encoding)
                )
                self._speech[key] = _split(data)
            return self._speech[key]

        work = loop.run_in_executor(None, make)
        content_type = "audio/wav" if container == "wav" else "application/octet-stream"
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        await self._delay(self.config.tts_first_byte_ms)
        for piece in await work:
            await response.write(piece)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    def app(self) -> web.Application:
        app = super().app()
        configured = {
            "llm": self.config.llm_first_token_ms,
            "stt": self.config.stt_ms,
            "tts": self.config.tts_first_byte_ms,
        }

        @web.middleware
        async def timed(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            started = time.monotonic()
            response = await handler(request)
            kind = _kind(request.path)
            if kind is not None:
                ended = time.monotonic()
                self.overheads[kind].append((ended - started) * 1000 - configured[kind])
                self.spans.append((kind, started, ended))
            record = request.get(RECORD)
            if kind == "llm" and record is not None:
                self._stamp_tools(record, started, time.monotonic())
            return response

        async def tool(request: web.Request) -> web.Response:
            received = time.monotonic()
            body = await request.json()
            await asyncio.sleep(self.tool_ms / 1000)
            stamps = self.tools.setdefault(tool_key(body["tool"], body["arguments"]), {})
            stamps.update(received=received, answered=time.monotonic())
            return web.json_response({"status": "ok", "checked": body["arguments"]})

        async def stats(_request: web.Request) -> web.Response:
            return web.json_response(
                {
                    "overheads_ms": self.overheads,
                    "spans": self.spans,
                    "tools": self.tools,
                    "loop_lag": self.lag.summary(),
                }
            )

        async def reset(_request: web.Request) -> web.Response:
            for values in self.overheads.values():
                values.clear()
            self.lag.samples.clear()
            self.spans.clear()
            self.tools.clear()
            self.requests.clear()
            return web.json_response({"status": "ok"})

        app.middlewares.append(timed)
        app.router.add_get("/_bench/stats", stats)
        app.router.add_post("/_bench/reset", reset)
        app.router.add_post(TOOL_PATH, tool)
        return app

    def _stamp_tools(self, record: RecordedRequest, arrived: float, streamed: float) -> None:
        """An LLM request: the first to carry a tool call's result arrived at `arrived`; the
        tool calls of its reply were streamed by `streamed` (the end of the response)."""
        for key in results_in(record.body if isinstance(record.body, dict) else {}):
            self.tools.setdefault(key, {}).setdefault("arrived", arrived)
        for name, arguments in record.tool_calls:
            self.tools.setdefault(tool_key(name, arguments), {}).setdefault("streamed", streamed)


async def run_vendors(args: argparse.Namespace) -> None:
    vendors = TimedVendors(
        tool_ms=args.tool_ms,
        llm_first_token_ms=args.llm_ms,
        stt_ms=args.stt_ms,
        tts_first_byte_ms=args.tts_ms,
    )
    origin = await vendors.start("127.0.0.1", args.port)
    vendors.lag.start()
    print(origin, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await vendors.stop()


# --- the contacts --------------------------------------------------------------------------------


def _chunk(arrived: float, pcm: bytes) -> list[float]:
    """[arrival seconds, duration seconds, 1 if any 20 ms of it is louder than silence]."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    speech = 0.0
    for at in range(0, samples.size, 160):
        frame = samples[at : at + 160]
        if frame.size and float(np.sqrt(np.mean(frame * frame))) > SPEECH_RMS:
            speech = 1.0
            break
    return [arrived, samples.size / SAMPLE_RATE, speech]


async def one_contact(url: str, session: ContactSession, delay: float) -> dict[str, Any]:
    """The same steps as sandbox_media.run_contact, keeping the stream for its answer time."""
    await asyncio.sleep(delay)
    dialled = time.monotonic()
    try:
        ws = await dial(url)  # a process at its call limit: dialled again until a place is free
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the others go on
        return {"call_id": session.custom_parameters["call_id"], "error": repr(exc)}
    waited = time.monotonic() - dialled
    stream = _Stream(ws, session)
    async with ws:
        ended_by = await stream.run()
    result = stream.result(ended_by)
    return {
        "call_id": session.custom_parameters["call_id"],
        "t0": stream.t0,
        "waited": waited,
        "ended_by": result.ended_by,
        "duration": result.duration_seconds,
        "lines": [
            [line.name, line.start_seconds, line.end_seconds, line.finished]
            for line in result.lines
        ],
        "chunks": [_chunk(chunk.arrived_seconds, chunk.pcm) for chunk in result.agent_chunks],
        "clears": result.clears,
    }


async def run_contacts(plan: dict[str, Any]) -> dict[str, Any]:
    lag = LoopLag()
    lag.start()
    count = len(plan["calls"])
    tasks = []
    for index, call in enumerate(plan["calls"]):
        session = ContactSession(
            call_sid=f"CA{call['call_id'].replace('-', '')}",
            account_sid="ACbench",
            stream_sid=f"MZ{call['call_id'].replace('-', '')}",
            script="person",
            custom_parameters={**call["parameters"], "answered_by": "human"},
            max_seconds=plan["max_seconds"],
        )
        delay = plan["ramp_seconds"] * index / count if count > 1 else 0.0
        tasks.append(one_contact(plan["url"], session, delay))
    results = await asyncio.gather(*tasks)
    with contextlib.suppress(Exception):
        lag._task.cancel()  # type: ignore[union-attr]
    return {"calls": results, "loop_lag": lag.summary()}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.voice")
    sub = parser.add_subparsers(dest="role", required=True)
    vendors = sub.add_parser("vendors")
    vendors.add_argument("--port", type=int, default=0)
    vendors.add_argument("--llm-ms", type=int, required=True)
    vendors.add_argument("--stt-ms", type=int, required=True)
    vendors.add_argument("--tts-ms", type=int, required=True)
    vendors.add_argument("--tool-ms", type=int, default=0)
    contacts = sub.add_parser("contacts")
    contacts.add_argument("--sessions", required=True)
    contacts.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.role == "vendors":
        asyncio.run(run_vendors(args))
    else:
        plan = json.loads(Path(args.sessions).read_text())
        Path(args.out).write_text(json.dumps(asyncio.run(run_contacts(plan))))
