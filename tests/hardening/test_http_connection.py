"""How the live server takes requests (api/asgi.py): a body in one piece or in many, and a
client that leaves before its answer."""

from __future__ import annotations

import json
import socket
import time
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tests.hardening.test_bad_input import CONTACTS, _live_tenant_key, _raw_request, email
from tests.helpers import Live


def _contacts(live: Live, key: str) -> list[dict[str, Any]]:
    listed = httpx.get(f"{live.base_url}{CONTACTS}?limit=100", headers={"x-api-key": key})
    assert listed.status_code == 200
    return list(listed.json()["contacts"])


@pytest.mark.parametrize("pause", [0.01, 0.15], ids=["within-a-second", "over-a-second"])
def test_a_body_sent_in_chunks_with_pauses_is_read_whole(
    live: Live, agency: Any, pause: float
) -> None:
    """Read at once when it is whole within a second, else by Quart's own reader (api/asgi.py);
    the same answer either way."""
    key = _live_tenant_key(live, agency.key)
    address = email()
    body = json.dumps({"email": address, "first_name": "Slow", "last_name": "Sender"}).encode()
    url = urlparse(live.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST {CONTACTS} HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
        )
        for start in range(0, len(body), 7):  # the server gets the body in many messages
            piece = body[start : start + 7]
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            time.sleep(pause)
        sock.sendall(b"0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201"), answer
    created = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert created["created"] is True

    # The same body in one piece matches the contact the pieces created.
    status, again = _raw_request(
        live,
        f"POST {CONTACTS} HTTP/1.1\r\nHost: x\r\nx-api-key: {key}"
        f"\r\nContent-Type: application/json\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n",
        body,
    )
    assert status == 200
    assert json.loads(again) == {
        "status": "success",
        "created": False,
        "contact_id": created["contact_id"],
    }
    stored = _contacts(live, key)
    assert [(c["email"], c["name"]) for c in stored] == [(address, "Slow Sender")]


def test_a_client_that_leaves_before_the_answer_does_not_cut_the_work_short(
    live: Live, agency: Any
) -> None:
    key = _live_tenant_key(live, agency.key)
    addresses = [email() for _ in range(5)]
    url = urlparse(live.base_url)
    for address in addresses:
        body = json.dumps({"email": address}).encode()
        with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
            sock.sendall(
                (
                    f"POST {CONTACTS} HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    "\r\n"
                ).encode()
                + body
            )
        # closed at once, without reading a byte of the answer

    deadline = time.monotonic() + 10
    while len(_contacts(live, key)) < len(addresses) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(c["email"] for c in _contacts(live, key)) == sorted(addresses)
    # The server goes on answering, and wrote no traceback about the lost answers.
    assert httpx.get(f"{live.base_url}/healthz").status_code == 200
    assert "Traceback" not in live.output()
