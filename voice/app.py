"""The `switchboard voice` process: the carrier's Media Streams WebSocket, Twilio's voice webhook
(voice/twilio.py) and a health check; one Pipecat pipeline per call (voice/call.py). Served by
hypercorn like the API."""

from __future__ import annotations

import asyncio
import contextlib
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
from voice.silero import shared_session
from voice.twilio import STREAM_PATH, TWIML_PATH, TwilioBridge


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
        try:
            yield
        finally:
            await pool.close()

    async def stream(websocket: WebSocket) -> None:
        runtime: CallRuntime = state["runtime"]
        if runtime.full():
            # This process has its SWITCHBOARD_VOICE_MAX_CALLS: the carrier tries again (the
            # sandbox does; behind SO_REUSEPORT or a balancer it may reach another process).
            metrics.STREAMS_BUSY.inc()
            await refuse_busy(websocket)
            return
        task = asyncio.current_task()
        if task is not None:
            runtime.active.add(task)  # counted before the first await: no race past the limit
        metrics.CALLS_ACTIVE.inc()
        try:
            await websocket.accept()
            await runtime.handle(websocket)
        finally:
            metrics.CALLS_ACTIVE.dec()
            if task is not None:
                runtime.active.discard(task)

    async def twilio_twiml(request: Request) -> Response:
        bridge: TwilioBridge = state["twilio"]
        return await bridge.twiml(request)

    async def health(_request: Request) -> JSONResponse:
        runtime: CallRuntime | None = state.get("runtime")
        return JSONResponse({"status": "ok", "calls": len(runtime.active) if runtime else 0,
                             "max_calls": settings.voice_max_calls})

    async def metrics_page(_request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    return Starlette(routes=[WebSocketRoute(STREAM_PATH, stream),
                             Route(TWIML_PATH, twilio_twiml, methods=["POST"]),
                             Route("/health", health), Route("/metrics", metrics_page)],
                     lifespan=lifespan)


async def refuse_busy(websocket: WebSocket) -> None:
    """503 to the WebSocket handshake, with Retry-After (the ASGI denial-response extension,
    which hypercorn serves); a server without it would answer 403."""
    busy = Response("the voice runtime is at its call limit", status_code=503,
                    headers={"Retry-After": "1"}, media_type="text/plain")
    try:
        await websocket.send_denial_response(busy)
    except RuntimeError:
        await websocket.close(code=1013)


async def serve_voice(settings: Settings, database_url: str, host: str, port: int,
                      stop: asyncio.Event, prefork_child: bool = False) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from tenancy import prefork

    config = Config()
    # A child of --processes listens on its own socket of the port's SO_REUSEPORT group.
    config.bind = ([f"fd://{prefork.listen(host, port).detach()}"] if prefork_child
                   else [f"{host}:{port}"])
    config.accesslog = None
    # On SIGTERM no new call is taken; running calls get this long to finish (CONTRACT 9).
    config.graceful_timeout = settings.voice_shutdown_grace_seconds
    await serve(build_voice_app(settings, database_url), config,  # type: ignore[arg-type]
                shutdown_trigger=stop.wait)
