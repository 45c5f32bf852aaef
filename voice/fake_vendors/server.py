"""The fake vendors' HTTP server: one aiohttp app, a mount per vendor, recording and faults."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from . import audio, llm

Kind = Literal["llm", "stt", "tts"]
Failure = int | Literal["hang"]

MOUNTS = {
    "openai": "/openai/v1",
    "anthropic": "/anthropic",
    "google": "/google",
    "deepseek": "/deepseek/v1",
    "grok": "/grok/v1",
    "deepgram": "/deepgram",
    "elevenlabs": "/elevenlabs",
    "cartesia": "/cartesia",
}
OPENAI_COMPATIBLE = ("openai", "deepseek", "grok")
DEFAULT_PHRASES = Path(__file__).resolve().parents[2] / "integrations/telephony/sandbox_audio"
OPENAI_TTS_RATE = 24000
RECORDED_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "xi-api-key")


def base_urls(origin: str) -> dict[str, str]:
    """Vendor name -> the base URL to configure for it, all on the one fake server."""
    return {vendor: origin.rstrip("/") + mount for vendor, mount in MOUNTS.items()}


def env_for(origin: str) -> dict[str, str]:
    """The SWITCHBOARD_<VENDOR>_BASE_URL settings that point every vendor at the fake."""
    return {f"SWITCHBOARD_{v.upper()}_BASE_URL": url for v, url in base_urls(origin).items()}


@dataclass
class FakeConfig:
    llm_first_token_ms: int = 0
    stt_ms: int = 0
    tts_first_byte_ms: int = 0
    # Keyed by "vendor.kind" ("openai.tts"), vendor ("anthropic") or kind ("stt"); the most
    # specific wins. A status code to answer with, or "hang" to never answer.
    failures: dict[str, Failure] = field(default_factory=dict)
    # A `Set-Cookie` header value every answer carries ("" for none), as a vendor's front end
    # may set one: what a client keeps and sends back shows in the recorded headers.
    set_cookie: str = ""

    def failure(self, vendor: str, kind: Kind) -> Failure | None:
        for key in (f"{vendor}.{kind}", vendor, kind):
            if key in self.failures:
                return self.failures[key]
        return None


@dataclass
class RecordedRequest:
    vendor: str
    kind: Kind
    method: str
    path: str
    query: dict[str, str]
    # Every header, names in lower case.
    headers: dict[str, str]
    # Parsed JSON; multipart fields (a file as {"filename", "content_type", "size"}); or for
    # a raw body {"content_type", "size"}.
    body: Any
    # What the fake answered: reply text, "end_call({...})", transcript or the spoken text.
    answer: str = ""
    status: int = 200
    # The LLM reply's tool calls, [name, arguments] each.
    tool_calls: list[list[Any]] = field(default_factory=list)
    # The client's address and port: requests on one kept-alive connection share it.
    peer: str = ""


Handler = Callable[[web.Request, RecordedRequest, Any], Awaitable[web.StreamResponse]]
# The key under which a vendor request carries its RecordedRequest (for middlewares).
RECORD = web.RequestKey("fake_record", RecordedRequest)


class FakeVendors:
    """Every LLM and speech vendor the voice runtime calls, on one local origin."""

    def __init__(
        self,
        phrases: Path | str = DEFAULT_PHRASES,
        *,
        llm_first_token_ms: int = 0,
        stt_ms: int = 0,
        tts_first_byte_ms: int = 0,
        failures: dict[str, Failure] | None = None,
    ) -> None:
        self.phrases = audio.PhraseBook.load(Path(phrases))
        self.config = FakeConfig(
            llm_first_token_ms, stt_ms, tts_first_byte_ms, dict(failures or {})
        )
        self.requests: list[RecordedRequest] = []
        self.origin = ""
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()

    def configure(self, **changes: Any) -> None:
        """Change latency or failures while running (the same as POST /_fake/config)."""
        known = {f.name for f in fields(FakeConfig)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        for name, value in changes.items():
            setattr(self.config, name, value)

    def reset(self) -> None:
        """Forget recorded requests, latency and failures."""
        self.requests.clear()
        self.config = FakeConfig()

    def requests_for(
        self, vendor: str | None = None, kind: Kind | None = None
    ) -> list[RecordedRequest]:
        return [r for r in self.requests if vendor in (None, r.vendor) and kind in (None, r.kind)]

    @property
    def base_urls(self) -> dict[str, str]:
        return base_urls(self.origin)

    @property
    def env(self) -> dict[str, str]:
        return env_for(self.origin)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self._closing.clear()
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()  # type: ignore[union-attr]
        self.origin = f"http://{host}:{bound[1]}"
        return self.origin

    async def stop(self) -> None:
        self._closing.set()
        if self._runner:
            await self._runner.cleanup()
            self._runner = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        routes = [
            web.get("/_fake/requests", self._list_requests),
            web.post("/_fake/reset", self._reset),
            web.get("/_fake/config", self._show_config),
            web.post("/_fake/config", self._set_config),
        ]
        for vendor in OPENAI_COMPATIBLE:
            mount = MOUNTS[vendor]
            routes += [
                self._route(f"{mount}/chat/completions", vendor, "llm", self._openai_chat),
                self._route(
                    f"{mount}/audio/transcriptions", vendor, "stt", self._openai_transcription
                ),
                self._route(f"{mount}/audio/speech", vendor, "tts", self._openai_speech),
            ]
        routes += [
            self._route("/anthropic/v1/messages", "anthropic", "llm", self._anthropic_messages),
            self._route("/google/{version}/models/{call}", "google", "llm", self._google),
            self._route("/deepgram/v1/listen", "deepgram", "stt", self._deepgram_listen),
            self._route("/deepgram/v1/speak", "deepgram", "tts", self._deepgram_speak),
            self._route("/cartesia/tts/bytes", "cartesia", "tts", self._cartesia_bytes),
        ]
        for suffix in ("", "/stream", "/with-timestamps", "/stream/with-timestamps"):
            routes.append(
                self._route(
                    f"/elevenlabs/v1/text-to-speech/{{voice_id}}{suffix}",
                    "elevenlabs",
                    "tts",
                    self._elevenlabs,
                )
            )
        app.add_routes(routes)
        app.on_response_prepare.append(self._set_cookie)
        return app

    async def _set_cookie(self, _request: web.Request, response: web.StreamResponse) -> None:
        if self.config.set_cookie:
            response.headers["Set-Cookie"] = self.config.set_cookie

    # --- the shared part of every vendor endpoint: record, fail if told to, answer ------------

    def _route(self, path: str, vendor: str, kind: Kind, handler: Handler) -> web.RouteDef:
        async def endpoint(request: web.Request) -> web.StreamResponse:
            body, parsed = await _read_body(request)
            record = RecordedRequest(
                vendor,
                kind,
                request.method,
                request.path,
                dict(request.query),
                {k.lower(): v for k, v in request.headers.items()},
                body,
                peer=_peer(request),
            )
            request[RECORD] = record
            self.requests.append(record)
            failure = self.config.failure(vendor, kind)
            if failure == "hang":
                await self._closing.wait()
                raise web.HTTPServiceUnavailable()
            if failure is not None:
                record.status = int(failure)
                return web.json_response(_error_body(vendor, int(failure)), status=int(failure))
            return await handler(request, record, parsed)

        return web.post(path, endpoint)

    async def _delay(self, ms: int) -> None:
        if ms > 0:
            await asyncio.sleep(ms / 1000)

    # --- control --------------------------------------------------------------------------------

    async def _list_requests(self, request: web.Request) -> web.Response:
        return web.json_response([asdict(r) for r in self.requests])

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def _show_config(self, request: web.Request) -> web.Response:
        return web.json_response(asdict(self.config))

    async def _set_config(self, request: web.Request) -> web.Response:
        try:
            self.configure(**await request.json())
        except (ValueError, TypeError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response(asdict(self.config))

    # --- LLMs -----------------------------------------------------------------------------------

    async def _openai_chat(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        reply = llm.structured_reply("openai", body) or llm.reply_to(llm.from_openai(body))
        _answered(record, reply)
        model = str(body.get("model", ""))
        if not body.get("stream"):
            await self._delay(self.config.llm_first_token_ms)
            return web.json_response(llm.openai_completion(reply, model))
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = [f"data: {json.dumps(c)}\n\n" for c in llm.openai_stream(reply, model, usage)]
        return await self._sse(request, [*events, "data: [DONE]\n\n"])

    async def _anthropic_messages(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        reply = llm.structured_reply("anthropic", body) or llm.reply_to(llm.from_anthropic(body))
        _answered(record, reply)
        model = str(body.get("model", ""))
        if not body.get("stream"):
            await self._delay(self.config.llm_first_token_ms)
            return web.json_response(llm.anthropic_message(reply, model))
        events = [
            f"event: {name}\ndata: {json.dumps(data)}\n\n"
            for name, data in llm.anthropic_stream(reply, model)
        ]
        return await self._sse(request, events)

    async def _google(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        model, _, method = request.match_info["call"].partition(":")
        reply = llm.structured_reply("google", body) or llm.reply_to(llm.from_google(body))
        _answered(record, reply)
        if method == "generateContent":
            await self._delay(self.config.llm_first_token_ms)
            return web.json_response(llm.google_response(reply, model))
        if method != "streamGenerateContent":
            raise web.HTTPNotFound()
        events = [f"data: {json.dumps(c)}\r\n\r\n" for c in llm.google_stream(reply, model)]
        return await self._sse(request, events)

    async def _sse(self, request: web.Request, events: list[str]) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        await self._delay(self.config.llm_first_token_ms)
        for event in events:
            await response.write(event.encode())
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    # --- speech to text -------------------------------------------------------------------------

    async def _openai_transcription(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        upload = body.get("file")
        if not isinstance(upload, bytes):
            return web.json_response(_error_body(record.vendor, 400), status=400)
        samples, rate = audio.read_wav(upload)
        text = await self._transcribe(record, samples, rate)
        seconds = len(samples) / rate
        form = body.get("response_format", "json")
        if form == "text":
            return web.Response(text=text)
        if form in ("srt", "vtt"):
            head = "WEBVTT\n\n" if form == "vtt" else "1\n"
            return web.Response(text=f"{head}00:00:00.000 --> {_clock(seconds)}\n{text}\n")
        answer: dict[str, Any] = {
            "text": text,
            "usage": {"type": "duration", "seconds": round(seconds)},
        }
        if form == "verbose_json":
            answer |= {
                "task": "transcribe",
                "language": body.get("language", "en"),
                "duration": seconds,
                "segments": [_segment(text, seconds)],
            }
        elif "logprobs" in body.get("include[]", ""):
            answer["logprobs"] = [
                {"token": w, "logprob": -0.01, "bytes": list(w.encode())} for w in text.split()
            ]
        return web.json_response(answer)

    async def _deepgram_listen(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        raw: bytes = body
        query = request.query
        if raw[:4] == b"RIFF":
            samples, rate = audio.read_wav(raw)
        elif query.get("encoding") == "mulaw":
            samples, rate = audio.from_ulaw(raw), int(query.get("sample_rate", 8000))
        else:
            samples, rate = audio.from_pcm16(raw), int(query.get("sample_rate", 16000))
        text = await self._transcribe(record, samples, rate)
        seconds = len(samples) / rate
        words = [
            {
                "word": w.strip(".,?!").lower(),
                "punctuated_word": w,
                "confidence": 0.99,
                "start": 0.0,
                "end": seconds,
            }
            for w in text.split()
        ]
        alternative = {"transcript": text, "confidence": 0.99 if text else 0.0, "words": words}
        return web.json_response(
            {
                "metadata": {
                    "request_id": f"fake-{len(self.requests)}",
                    "created": _now(),
                    "duration": seconds,
                    "channels": 1,
                    "models": [query.get("model", "nova-3")],
                },
                "results": {"channels": [{"alternatives": [alternative]}]},
            }
        )

    async def _transcribe(self, record: RecordedRequest, samples: audio.Samples, rate: int) -> str:
        await self._delay(self.config.stt_ms)
        record.answer = self.phrases.recognise(samples, rate)
        return record.answer

    # --- text to speech -------------------------------------------------------------------------

    async def _openai_speech(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        form = body.get("response_format", "mp3")
        if form not in ("pcm", "wav"):
            return _unsupported(record, f"response_format {form!r} (the fake makes pcm, wav)")
        return await self._speak(
            request,
            record,
            str(body.get("input", "")),
            OPENAI_TTS_RATE,
            "pcm_s16le",
            container="wav" if form == "wav" else "raw",
        )

    async def _deepgram_speak(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        query = request.query
        encoding = {"linear16": "pcm_s16le", "mulaw": "pcm_mulaw", "alaw": "pcm_alaw"}.get(
            query.get("encoding", "linear16")
        )
        if encoding is None:
            return _unsupported(record, f"encoding {query.get('encoding')!r}")
        container = query.get("container", "wav" if encoding == "pcm_s16le" else "none")
        return await self._speak(
            request,
            record,
            str(body.get("text", "")),
            int(query.get("sample_rate", 24000)),
            encoding,
            container="wav" if container == "wav" else "raw",
        )

    async def _cartesia_bytes(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        output = body.get("output_format") or {}
        encoding = output.get("encoding", "pcm_s16le")
        if encoding not in ("pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw"):
            return _unsupported(record, f"encoding {encoding!r}")
        return await self._speak(
            request,
            record,
            str(body.get("transcript", "")),
            int(output.get("sample_rate", 24000)),
            encoding,
            container=output.get("container", "raw"),
        )

    async def _elevenlabs(
        self, request: web.Request, record: RecordedRequest, body: Any
    ) -> web.StreamResponse:
        form = request.query.get("output_format", "mp3_44100_128")
        codec, _, rate = form.partition("_")
        encoding = {"pcm": "pcm_s16le", "ulaw": "pcm_mulaw", "alaw": "pcm_alaw"}.get(codec)
        if encoding is None or not rate.isdigit():
            return _unsupported(record, f"output_format {form!r} (the fake makes pcm_*, ulaw_*)")
        text = str(body.get("text", ""))
        if not request.path.endswith("/with-timestamps"):
            return await self._speak(request, record, text, int(rate), encoding)
        record.answer = text
        pieces = _split(_encode(audio.synthesize(text, int(rate)), encoding))
        seconds = len(text) and max(audio.MIN_SPEECH_MS, audio.MS_PER_CHARACTER * len(text))
        alignment = _alignment(text, seconds / 1000)
        lines = [
            {
                "audio_base64": base64.b64encode(p).decode(),
                "alignment": alignment if i == 0 else None,
                "normalized_alignment": alignment if i == 0 else None,
            }
            for i, p in enumerate(pieces)
        ]
        if "/stream/" not in request.path:
            await self._delay(self.config.tts_first_byte_ms)
            whole = b"".join(pieces)
            return web.json_response(
                {
                    "audio_base64": base64.b64encode(whole).decode(),
                    "alignment": alignment,
                    "normalized_alignment": alignment,
                }
            )
        return await self._stream(
            request, [(json.dumps(line) + "\n").encode() for line in lines], "application/json"
        )

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
        samples = audio.synthesize(text, rate)
        if container == "wav":
            return await self._stream(request, _split(audio.wav(samples, rate)), "audio/wav")
        return await self._stream(
            request, _split(_encode(samples, encoding)), "application/octet-stream"
        )

    async def _stream(
        self, request: web.Request, pieces: Iterable[bytes], content_type: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        await self._delay(self.config.tts_first_byte_ms)
        for piece in pieces:
            await response.write(piece)
            await asyncio.sleep(0)
        await response.write_eof()
        return response


def _answered(record: RecordedRequest, reply: llm.Reply) -> None:
    record.answer = reply.summary
    record.tool_calls = [[name, arguments] for name, arguments in reply.tool_calls]


def _peer(request: web.Request) -> str:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return f"{peer[0]}:{peer[1]}" if peer else ""


async def _read_body(request: web.Request) -> tuple[Any, Any]:
    """(what to record, what the handler reads) for a JSON, multipart or raw body."""
    content_type = request.content_type
    if content_type == "application/json":
        document = await request.json()
        return document, document
    if content_type.startswith("multipart/"):
        recorded: dict[str, Any] = {}
        parsed: dict[str, Any] = {}
        form = await request.post()
        for name, value in form.items():
            if isinstance(value, web.FileField):
                data = value.file.read()
                parsed[name] = data
                recorded[name] = {
                    "filename": value.filename,
                    "content_type": value.content_type,
                    "size": len(data),
                }
            else:
                # Repeated fields (include[]) are joined with commas.
                text = str(value)
                parsed[name] = f"{parsed[name]},{text}" if name in parsed else text
                recorded[name] = parsed[name]
        return recorded, parsed
    raw = await request.read()
    return {"content_type": content_type, "size": len(raw)}, raw


def _encode(samples: audio.Samples, encoding: str) -> bytes:
    if encoding == "pcm_mulaw":
        return audio.ulaw(samples)
    if encoding == "pcm_alaw":
        return audio.alaw(samples)
    if encoding == "pcm_f32le":
        return samples.astype("<f4").tobytes()
    return audio.pcm16(samples)


def _split(data: bytes, size: int = 4800) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


def _alignment(text: str, seconds: float) -> dict[str, Any]:
    step = seconds / max(1, len(text))
    starts = [round(i * step, 3) for i in range(len(text))]
    return {
        "characters": list(text),
        "character_start_times_seconds": starts,
        "character_end_times_seconds": [round(s + step, 3) for s in starts],
    }


def _segment(text: str, seconds: float) -> dict[str, Any]:
    return {
        "id": 0,
        "seek": 0,
        "start": 0.0,
        "end": seconds,
        "text": text,
        "tokens": [],
        "temperature": 0.0,
        "avg_logprob": -0.01,
        "compression_ratio": 1.0,
        "no_speech_prob": 0.0 if text else 1.0,
    }


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _unsupported(record: RecordedRequest, what: str) -> web.Response:
    record.status = 422
    return web.json_response(
        {"error": {"message": f"fake vendors: unsupported {what}"}}, status=422
    )


def _error_body(vendor: str, status: int) -> dict[str, Any]:
    """An error in the vendor's own shape, so its SDK raises its own exception type."""
    message = f"fake {vendor} failure ({status})"
    if vendor == "anthropic":
        kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if vendor == "google":
        state = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}.get(status, "INTERNAL")
        return {"error": {"code": status, "message": message, "status": state}}
    if vendor == "deepgram":
        return {"err_code": "FAKE_FAILURE", "err_msg": message}
    if vendor == "elevenlabs":
        return {"detail": {"status": "fake_failure", "message": message}}
    return {"error": {"message": message, "type": "fake_failure", "code": status}}
