"""A loopback HTTP receiver for webhook tests: records every request, answers as scripted."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """`script(path, 500, 500)` answers the next two requests to `path` with 500, then 200.

    A scripted answer may also be `(status, {"location": "/x"})` to add headers, or `"hang"`
    to answer nothing for a second and close.
    """

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.answers: dict[str, deque[Any]] = defaultdict(deque)
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

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

    def to(self, path: str) -> list[Received]:
        return [request for request in self.requests if request.path == path]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
            self.requests.append(Received(method, path, headers, body))
            answer = self.answers[path].popleft() if self.answers[path] else 200
            if answer == "hang":
                await asyncio.sleep(1)
                return
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
    """Standard Webhooks verification, written from the spec (independent of our signer)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = (f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}."
              .encode() + request.body)
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [part.split(",", 1)[1] for part in request.headers["webhook-signature"].split()
               if part.startswith("v1,")]
    return any(hmac.compare_digest(expected, value) for value in offered)
