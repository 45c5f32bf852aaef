"""Who the voice runtime lets onto a call: only a Media Streams connection whose `start` carries
the token we signed for that call, within AUTH_SECONDS (5 s) of its handshake. Anything else is
closed (1008) without touching a call or taking a place of the call limit, and the runtime goes
on serving."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from integrations.telephony.sandbox_media import stream_url
from tenancy.call_tokens import call_token
from tenancy.settings import get_settings
from tests.voice.test_call_scripts import voice_metrics
from voice import call as call_module
from voice.call import AUTH_SECONDS, CallRuntime


def start_message(parameters: dict[str, str]) -> str:
    return json.dumps(
        {
            "event": "start",
            "streamSid": "MZ1",
            "start": {
                "streamSid": "MZ1",
                "callSid": "CA1",
                "accountSid": "AC1",
                "tracks": ["inbound"],
                "customParameters": parameters,
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            },
        }
    )


async def closed_with(url: str, *messages: str | bytes) -> int | None:
    async with connect(url, open_timeout=10) as ws:
        try:
            for message in messages:
                await ws.send(message)
            await ws.recv()
        except ConnectionClosed:
            pass
        await ws.wait_closed()
        return ws.close_code


@pytest.mark.parametrize(
    "messages",
    [
        (json.dumps({"event": "connected"}), start_message({})),
        (
            start_message(
                {
                    "call_id": str(uuid.uuid4()),
                    "sub_account_id": str(uuid.uuid4()),
                    "token": "0" * 64,
                }
            ),
        ),
        ("not json",),
        (b"\x00\x01binary",),
        (json.dumps(["a", "list"]),),
        (json.dumps({"event": "stop"}),),
    ],
    ids=["no parameters", "forged token", "not json", "binary", "not an object", "stop first"],
)
async def test_a_stream_that_is_not_one_of_our_calls_is_closed(
    voice_runtime: Any, messages: tuple[Any, ...]
) -> None:
    url = stream_url(voice_runtime.url)
    refused = "switchboard_voice_calls_total[('ended_reason', 'refused')]"
    before = (await voice_metrics(voice_runtime)).get(refused, 0.0)
    assert await closed_with(url, *messages) == 1008
    assert (await voice_metrics(voice_runtime))[refused] == before + 1
    async with httpx.AsyncClient(timeout=5) as http:
        health = await http.get(voice_runtime.url.replace("ws://", "http://") + "/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"


async def test_a_token_for_a_call_that_is_not_waiting_is_closed(
    voice_runtime: Any, tenant: Any
) -> None:
    # Signed correctly, for a call id this sub-account never placed.
    call_id = uuid.uuid4()
    token = call_token(get_settings().key_pepper, tenant.id, call_id)
    parameters = {"call_id": str(call_id), "sub_account_id": str(tenant.id), "token": token}
    assert await closed_with(stream_url(voice_runtime.url), start_message(parameters)) == 1008


# --- admission: a call named within AUTH_SECONDS of the handshake (CONTRACT 11, 11a) -----------


def test_a_connection_has_five_seconds_to_name_its_call() -> None:
    assert AUTH_SECONDS == 5.0


async def health(voice_runtime: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=5) as http:
        answer = await http.get(voice_runtime.url.replace("ws://", "http://") + "/health")
    body: dict[str, Any] = answer.json()
    return body


async def closed_after(url: str, every: float | None) -> tuple[int | None, float]:
    """Open a stream that sends nothing (`every` None) or only `connected` every `every`
    seconds; its close code and how long it stayed open."""
    started = time.monotonic()
    async with connect(url, open_timeout=10) as ws:
        with contextlib.suppress(ConnectionClosed):
            while True:
                if every is None:
                    await ws.recv()
                else:
                    await ws.send(
                        json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
                    )
                    await asyncio.sleep(every)
        await ws.wait_closed()
        return ws.close_code, time.monotonic() - started


async def test_a_connection_that_names_no_call_is_closed_after_five_seconds_holding_no_place(
    voice_runtime: Any,
) -> None:
    url = stream_url(voice_runtime.url)
    refused = "switchboard_voice_calls_total[('ended_reason', 'refused')]"
    before = (await voice_metrics(voice_runtime)).get(refused, 0.0)
    silent = asyncio.create_task(closed_after(url, None))
    chatty = asyncio.create_task(closed_after(url, 1.0))  # `connected` does not extend the 5 s
    await asyncio.sleep(1.5)
    while_open = await health(voice_runtime)
    (silent_code, silent_open), (chatty_code, chatty_open) = await asyncio.gather(silent, chatty)
    assert (silent_code, chatty_code) == (1008, 1008)
    # Closed at the 5 s (the timing is the runtime's; only its order of magnitude is checked).
    assert AUTH_SECONDS - 1 < silent_open < AUTH_SECONDS + 3
    assert AUTH_SECONDS - 1 < chatty_open < AUTH_SECONDS + 3
    # Pending, never on a place of the call limit.
    assert while_open["pending"] >= 2 and while_open["calls"] == 0
    assert (await voice_metrics(voice_runtime))[refused] == before + 2
    assert (await health(voice_runtime))["pending"] == 0


class Unnamed:
    """A connection, as the runtime's side sees it, that names no call until told to."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[str] = asyncio.Queue()

    async def accept(self) -> None:
        return None

    async def receive_text(self) -> str:
        return await self.messages.get()


async def test_beyond_the_pending_limit_the_oldest_unnamed_connection_makes_room(
    monkeypatch,
) -> None:
    monkeypatch.setattr(call_module, "MAX_PENDING_STREAMS", 3)
    runtime = CallRuntime(get_settings(), pool=None)  # type: ignore[arg-type]
    connections = [Unnamed() for _ in range(5)]
    tasks = []
    for connection in connections:
        tasks.append(asyncio.create_task(runtime._named_call(connection)))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
    # The two oldest were closed "try again later" to let the newest in; three wait.
    assert [task.done() for task in tasks] == [True, True, False, False, False]
    assert [task.result() for task in tasks[:2]] == [1013, 1013]
    assert runtime.pending == 3 and not runtime.active
    # A waiting one that names a call with a valid token is let through.
    call_id, tenant_id = uuid.uuid4(), uuid.uuid4()
    token = call_token(get_settings().key_pepper, tenant_id, call_id)
    await connections[4].messages.put(json.dumps({"event": "connected"}))
    await connections[4].messages.put(
        start_message({"call_id": str(call_id), "sub_account_id": str(tenant_id), "token": token})
    )
    named = await tasks[4]
    assert named.parameters["call_id"] == str(call_id)  # type: ignore[union-attr]
    for task in tasks[2:4]:
        task.cancel()
    await asyncio.gather(*tasks[2:4], return_exceptions=True)
    assert runtime.pending == 0
