"""A loopback HTTP receiver for webhook tests: records every request, answers as scripted.

Given a path's signing secret (`verify_with`), it checks each request on arrival with the
`standardwebhooks` package, as a real client would (signature and timestamp tolerance), and
answers 401 to one that fails.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

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

    A scripted answer may also be `(status, {"location": "/x"})` to add headers, `"hang"`
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
            status, extra = answer if isinstance(answer, tuple) else (answer, {})
            lines_out = [f"HTTP/1.1 {status} Scripted", "content-length: 0", "connection: close"]
            lines_out += [f"{name}: {value}" for name, value in extra.items()]
            writer.write(("\r\n".join(lines_out) + "\r\n\r\n").encode("latin-1"))
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
