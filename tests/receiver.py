"""Loopback HTTP receivers for webhook tests.

`Receiver` (the `receiver` fixture of tests/conftest.py) records every request and answers as
scripted. `RecordingReceiver` (contacts' `receiver`) answers a list of statuses, then 200.
`PostBox` (the calls' `receiver`) is a Quart app that answers 204 and sets an event on arrival.

Given a path's signing secret (`verify_with`), it checks each request on arrival with the
`standardwebhooks` package, as a real client would (signature and timestamp tolerance), and
answers 401 to one that fails.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import socket
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config
from quart import Quart, Response, request
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    arrived_at: float = 0.0
    # The standardwebhooks verdict on arrival; None when the path has no secret to check with.
    verified: bool | None = None

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """`script(path, 500, 500)` answers the next two requests to `path` with 500, then 200.

    A scripted answer may also be `(status, {"location": "/x"})` to add headers (and
    `(status, headers, body_bytes)` to answer a body), `"hang"`
    to answer nothing for a second and close, or `("sleep", seconds)` to answer 200 only after
    `seconds` (past a sender's timeout). `connections` counts every TCP connection accepted.
    """

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.answers: dict[str, deque[Any]] = defaultdict(deque)
        self.secrets: dict[str, str] = {}
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.connections = 0

    async def start(self) -> Receiver:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, path: str, *answers: Any) -> None:
        self.answers[path].extend(answers)

    def verify_with(self, path: str, secret: str) -> None:
        self.secrets[path] = secret

    def to(self, path: str) -> list[Received]:
        return [request for request in self.requests if request.path == path]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            received = Received(method, path, headers, body, time.time())
            if path in self.secrets:
                received.verified = signature_valid(self.secrets[path], received)
            self.requests.append(received)
            answer = self.answers[path].popleft() if self.answers[path] else 200
            if received.verified is False:
                answer = 401
            if answer == "hang":
                await asyncio.sleep(1)
                return
            if isinstance(answer, tuple) and answer[0] == "sleep":
                await asyncio.sleep(answer[1])
                answer = 200
            status, extra, content = (
                (answer + (b"",))[:3] if isinstance(answer, tuple) else (answer, {}, b"")
            )
            lines_out = [
                f"HTTP/1.1 {status} Scripted",
                f"content-length: {len(content)}",
                "connection: close",
            ]
            lines_out += [f"{name}: {value}" for name, value in extra.items()]
            writer.write(("\r\n".join(lines_out) + "\r\n\r\n").encode("latin-1") + content)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def signature_valid(secret: str, request: Received) -> bool:
    """Standard Webhooks verification by the `standardwebhooks` package (also checks that the
    timestamp is within its five-minute tolerance of now)."""
    try:
        Webhook(secret).verify(request.body, request.headers)
    except (WebhookVerificationError, ValueError):
        return False
    return True


def signature_verifies(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks verification written from the spec (no timestamp tolerance): a check
    independent of the `standardwebhooks` package that `signature_valid` uses."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, part.split(",", 1)[1])
        for part in headers["webhook-signature"].split()
        if part.startswith("v1,")
    )


class RecordingReceiver:
    """Records every request; answers the scripted statuses first, then 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.statuses: list[int] = []
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> RecordingReceiver:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/hook"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in head[1:] if ":" in line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests.append((headers, body))
            status = self.statuses.pop(0) if self.statuses else 200
            writer.write(
                f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode()
            )
            await writer.drain()
        finally:
            writer.close()


@pytest.fixture(name="receiver")
async def recording_receiver() -> AsyncIterator[RecordingReceiver]:
    server = await RecordingReceiver().start()
    yield server
    assert server.server is not None
    server.server.close()
    await server.server.wait_closed()


@contextlib.asynccontextmanager
async def serving(app: Quart) -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1 for the duration of the block; yields its base URL.

    The socket is bound here (port 0) and handed to hypercorn: picking a free port and binding
    it later leaves a window in which another socket takes it, and then the server never
    starts while the test posts to a dead port."""
    config = Config()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config.bind = [f"fd://{listener.detach()}"]  # hypercorn owns (and closes) it from here
    config.accesslog = None
    config.errorlog = None
    stop = asyncio.Event()
    task = asyncio.create_task(serve(app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    base = f"http://127.0.0.1:{port}"
    for _ in range(250):
        if task.done():
            task.result()  # the server failed to start: say why
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            break
        except OSError:
            await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"the test server on port {port} never accepted a connection")
    try:
        yield base
    finally:
        stop.set()
        await task


@dataclass
class PostBox:
    url: str
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture(name="receiver")
async def post_box() -> AsyncIterator[PostBox]:
    """A webhook receiver on loopback that records every POST and answers 204."""
    app = Quart("receiver")
    box = PostBox("")

    @app.post("/hook")
    async def hook() -> Response:
        box.received.append(
            (
                {k.lower(): v for k, v in request.headers.items()},
                await request.get_data(as_text=False),
            )
        )
        box.arrived.set()
        return Response("", status=204)

    async with serving(app) as base:
        box.url = f"{base}/hook"
        yield box
