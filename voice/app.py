"""The `switchboard voice` process: the carrier's Media Streams WebSocket, Twilio's voice webhook
(voice/twilio.py) and a health check; one Pipecat pipeline per call (voice/call.py). Served by
hypercorn like the API."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from tenancy.db import create_pool
from tenancy.settings import Settings
from voice import metrics
from voice.call import CallRuntime
from voice.loop_watchdog import LoopWatchdog
from voice.silero import shared_session
from voice.twilio import STREAM_PATH, TWIML_PATH, TwilioBridge

MAX_MESSAGE_BYTES = 256 * 1024


def build_voice_app(settings: Settings, database_url: str) -> Starlette:
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        pool = await create_pool(database_url, min_size=1, max_size=settings.db_pool_max)
        # Silero's ONNX session, shared by every call, blocks for about 30 ms to build: off the
        # loop, before the first call.
        await asyncio.to_thread(shared_session)
        state["runtime"] = CallRuntime(settings, pool)
        state["twilio"] = TwilioBridge(settings, pool, busy=state["runtime"].full)
        # What start-up built (Pipecat, numpy, onnxruntime, every module: about 350,000 objects)
        # lives as long as the process. Frozen, out of the collector's reach: a full collection
        # walked all of it on the loop, holding every call's audio for about 240 ms
        # (bench/RESULTS.md, "Voice runtime: tool calls").
        gc.collect()
        gc.freeze()
        watchdog = None
        if settings.voice_loop_stall_ms:
            watchdog = LoopWatchdog(asyncio.get_running_loop(), settings.voice_loop_stall_ms / 1000)
            watchdog.start()
        try:
            yield
        finally:
            if watchdog is not None:
                watchdog.stop()
            await state["runtime"].close()
            await pool.close()

    async def stream(websocket: WebSocket) -> None:
        # Admission, the call limit and the call itself: CallRuntime.handle (CONTRACT 11).
        runtime: CallRuntime = state["runtime"]
        await runtime.handle(websocket)

    async def twilio_twiml(request: Request) -> Response:
        bridge: TwilioBridge = state["twilio"]
        return await bridge.twiml(request)

    async def health(_request: Request) -> JSONResponse:
        runtime: CallRuntime | None = state.get("runtime")
        return JSONResponse(
            {
                "status": "ok",
                "calls": len(runtime.active) if runtime else 0,
                "max_calls": settings.voice_max_calls,
                "pending": runtime.pending if runtime else 0,
            }
        )

    async def metrics_page(_request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    return Starlette(
        routes=[
            WebSocketRoute(STREAM_PATH, stream),
            Route(TWIML_PATH, twilio_twiml, methods=["POST"]),
            Route("/health", health),
            Route("/metrics", metrics_page),
        ],
        lifespan=lifespan,
    )


async def serve_voice(
    settings: Settings,
    database_url: str,
    host: str,
    port: int,
    stop: asyncio.Event,
    prefork_child: bool = False,
) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from tenancy import prefork

    config = Config()
    # A child of --processes listens on its own socket of the port's SO_REUSEPORT group.
    config.bind = (
        [f"fd://{prefork.listen(host, port).detach()}"] if prefork_child else [f"{host}:{port}"]
    )
    config.accesslog = None
    # Media Streams messages are small (a 20 ms media message is about 300 bytes): a larger one
    # closes the connection (1009), so connections that never name a call hold little memory.
    config.websocket_max_message_size = MAX_MESSAGE_BYTES
    # On SIGTERM no new call is taken; running calls get this long to finish (CONTRACT 9).
    config.graceful_timeout = settings.voice_shutdown_grace_seconds
    app = build_voice_app(settings, database_url)
    await serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
