"""Who the voice runtime lets onto a call: only a Media Streams connection whose `start` carries
the token we signed for that call. Anything else is closed (1008) without touching a call, and
the runtime goes on serving."""

from __future__ import annotations

import json
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


def start_message(parameters: dict[str, str]) -> str:
    return json.dumps({"event": "start", "streamSid": "MZ1", "start": {
        "streamSid": "MZ1", "callSid": "CA1", "accountSid": "AC1", "tracks": ["inbound"],
        "customParameters": parameters,
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}}})


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


@pytest.mark.parametrize("messages", [
    (json.dumps({"event": "connected"}), start_message({})),
    (start_message({"call_id": str(uuid.uuid4()), "sub_account_id": str(uuid.uuid4()),
                    "token": "0" * 64}),),
    ("not json",),
    (b"\x00\x01binary",),
    (json.dumps(["a", "list"]),),
    (json.dumps({"event": "stop"}),),
], ids=["no parameters", "forged token", "not json", "binary", "not an object", "stop first"])
async def test_a_stream_that_is_not_one_of_our_calls_is_closed(voice_runtime: Any,
                                                               messages: tuple[Any, ...]) -> None:
    url = stream_url(voice_runtime.url)
    refused = "switchboard_voice_calls_total[('ended_reason', 'refused')]"
    before = (await voice_metrics(voice_runtime)).get(refused, 0.0)
    assert await closed_with(url, *messages) == 1008
    assert (await voice_metrics(voice_runtime))[refused] == before + 1
    async with httpx.AsyncClient(timeout=5) as http:
        health = await http.get(voice_runtime.url.replace("ws://", "http://") + "/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"


async def test_a_token_for_a_call_that_is_not_waiting_is_closed(voice_runtime: Any,
                                                                tenant: Any) -> None:
    # Signed correctly, for a call id this sub-account never placed.
    call_id = uuid.uuid4()
    token = call_token(get_settings().key_pepper, tenant.id, call_id)
    parameters = {"call_id": str(call_id), "sub_account_id": str(tenant.id), "token": token}
    assert await closed_with(stream_url(voice_runtime.url), start_message(parameters)) == 1008
