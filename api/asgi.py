"""How the app takes an HTTP request from the ASGI server: Quart's way, minus three tasks.

Quart serves each request with a task that reads the body, a task that runs the handler and a
third (asyncio.wait_for) that sends the response. Almost every request to this API arrives
whole at once (a GET, or a JSON body of a few kilobytes), and then those tasks only cost time:
such a request is read, handled and answered in the server's own task, the answer sent under
`asyncio.timeout`. A body still arriving after INLINE_BODY_SECONDS, or one over the size limit,
is handed to Quart's own code with the messages read so far. A request that declares no body
(HTTP/1.x, no Content-Length or 0, no Transfer-Encoding) is whole once its head is parsed, so
the server has its one message ready: it is read without a timer. A response whose body is in
memory goes out as two messages (start, then the whole body) rather than Quart's three.

One difference, a decision (docs/decisions.md): a client that disconnects after sending its
whole request does not cancel the handler. The work finishes (a transaction is committed or
rolled back, never cut off) and the server drops the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from hypercorn.typing import ASGIReceiveCallable, ASGIReceiveEvent, ASGISendCallable
from quart.utils import encode_headers
from quart.wrappers import Request, Response
from quart.wrappers.response import DataBody

from api.framework import QuartHTTPConnection, unhandled_error_response

INLINE_BODY_SECONDS = 1.0


class HTTPConnection(QuartHTTPConnection):
    async def __call__(self, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        messages: list[Any] = []
        whole = await self._read_at_once(receive, messages)
        if whole is None:
            return  # the client left before its request was read
        if not whole:
            await super().__call__(_replaying(messages, receive), send)
            return
        request = self.new_request(send)
        for message in messages:
            request.body.append(message.get("body", b""))
        request.body.set_complete()
        await self.handle_request(request, send)

    async def _read_at_once(self, receive: ASGIReceiveCallable, messages: list[Any]) -> bool | None:
        """Take the request's messages into `messages`: True once the body is whole, False if
        it is still arriving after INLINE_BODY_SECONDS or is over the size limit (Quart's code
        then answers 408 or 413), None if the client disconnected."""
        size, limit = 0, self.app.config["MAX_CONTENT_LENGTH"]
        timer = (
            contextlib.nullcontext()
            if self.scope["http_version"] != "2" and _declares_no_body(self.scope["headers"])
            else asyncio.timeout(INLINE_BODY_SECONDS)
        )
        try:
            async with timer:
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return None
                    messages.append(message)
                    if not message.get("more_body", False):
                        return True
                    size += len(message.get("body", b""))
                    if limit is not None and size > limit:
                        return False
        except TimeoutError:
            return False

    async def handle_request(self, request: Request, send: ASGISendCallable) -> None:
        try:
            response = await self.app.handle_request(request)
        except Exception as error:
            response = await unhandled_error_response(self.app, error)
        if isinstance(response, Response) and response.timeout != Ellipsis:
            timeout = cast(float | None, response.timeout)
        else:
            timeout = self.app.config["RESPONSE_TIMEOUT"]
        try:
            async with asyncio.timeout(timeout):
                await self.send_response(send, response)
        except TimeoutError:
            pass

    async def send_response(self, send: ASGISendCallable, response: Any) -> None:
        body = getattr(response, "response", None)
        if type(body) is not DataBody:  # streamed (or a werkzeug response): Quart's way
            await self.quart_send_response(send, response)
            return
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": encode_headers(response.headers),
            }
        )
        await send(
            {
                "type": "http.response.body",
                "body": body.data[body.begin : body.end],
                "more_body": False,
            }
        )


def _declares_no_body(headers: Any) -> bool:
    """HTTP/1.x: no Transfer-Encoding and no (or a zero) Content-Length means no body (RFC 9112
    section 6.3). HTTP/2 may send a body without either, so it is not asked."""
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return False
    return True


def _replaying(messages: list[Any], receive: ASGIReceiveCallable) -> ASGIReceiveCallable:
    """`receive`, giving first the messages already taken."""
    pending = list(reversed(messages))

    async def replay() -> ASGIReceiveEvent:
        if pending:
            return cast(ASGIReceiveEvent, pending.pop())
        return await receive()

    return replay
