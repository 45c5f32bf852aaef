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
from voice.twilio import STREAM_PATH, TWIML_PATH, TwilioBridge


def build_voice_app(settings: Settings, database_url: str) -> Starlette:
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        pool = await create_pool(database_url, min_size=1, max_size=settings.db_pool_max)
        state["runtime"] = CallRuntime(settings, pool)
        state["twilio"] = TwilioBridge(settings, pool)
        try:
            yield
        finally:
            await pool.close()

    async def stream(websocket: WebSocket) -> None:
        await websocket.accept()
        runtime: CallRuntime = state["runtime"]
        task = asyncio.current_task()
        if task is not None:
            runtime.active.add(task)
        metrics.CALLS_ACTIVE.inc()
        try:
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
        return JSONResponse({"status": "ok",
                             "calls": len(runtime.active) if runtime else 0})

    async def metrics_page(_request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    return Starlette(routes=[WebSocketRoute(STREAM_PATH, stream),
                             Route(TWIML_PATH, twilio_twiml, methods=["POST"]),
                             Route("/health", health), Route("/metrics", metrics_page)],
                     lifespan=lifespan)


async def serve_voice(settings: Settings, database_url: str, host: str, port: int,
                      stop: asyncio.Event) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    # On SIGTERM no new call is taken; running calls get this long to finish (CONTRACT 9).
    config.graceful_timeout = settings.voice_shutdown_grace_seconds
    await serve(build_voice_app(settings, database_url), config,  # type: ignore[arg-type]
                shutdown_trigger=stop.wait)
