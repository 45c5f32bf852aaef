"""A voice process's calls share its connections to the vendors (voice/vendors.py VendorClients):
a call's first requests go out on connections an earlier call opened, and nothing of one
sub-account (its key, a cookie a vendor set on its answers) reaches another's requests."""

from __future__ import annotations

import httpx2
import pytest

from tests.voice.test_call_scripts import PERSON, call_through

pytestmark = pytest.mark.voice_e2e

COOKIE = "vendor_session=set-for-the-first-call; Path=/"


async def test_a_default_client_would_send_the_vendors_cookie_back(vendors) -> None:
    """What the next test rules out: a client that keeps cookies sends this one back."""
    vendors.configure(set_cookie=COOKIE)
    url = vendors.base_urls["openai"] + "/chat/completions"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello?"}]}
    async with httpx2.AsyncClient() as plain:
        await plain.post(url, json=body)
        await plain.post(url, json=body)
    assert vendors.requests[1].headers.get("cookie") == "vendor_session=set-for-the-first-call"


async def test_a_second_sub_accounts_call_reuses_the_connections_with_its_own_key_only(
    client, tenant, tenant_second, worker, vendors
) -> None:
    vendors.configure(set_cookie=COOKIE)
    first = await call_through(client, tenant, PERSON, max_duration=0.1, voice_id="openai/nova")
    first_requests = list(vendors.requests)
    vendors.requests.clear()
    second = await call_through(
        client, tenant_second, PERSON, max_duration=0.1, voice_id="openai/nova"
    )
    second_requests = list(vendors.requests)

    assert first["status"] == second["status"] == "completed"
    kinds = {r.kind for r in second_requests}
    assert kinds == {"stt", "llm", "tts"}, kinds
    # Each call's transcription, model and voice requests carry its own sub-account's key.
    first_keys = {r.headers["authorization"] for r in first_requests}
    second_keys = {r.headers["authorization"] for r in second_requests}
    assert len(first_keys) == len(second_keys) == 1 and first_keys != second_keys
    # The vendor set a cookie on every answer; no request sent one back.
    assert [r for r in first_requests + second_requests if "cookie" in r.headers] == []
    # The second call's first request went out on a connection the first call had used.
    assert second_requests[0].peer in {r.peer for r in first_requests}
