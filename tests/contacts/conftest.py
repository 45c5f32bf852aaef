"""Helpers for the contact, tag, note, custom-field and company tests."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import random
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

BASE = "/webhooks/inbound"
CONTACTS = f"{BASE}/contacts"


def unique_email(prefix: str = "contact") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}@example.com"


def unique_phone() -> str:
    """A random number that is valid E.164 and valid for `phonenumbers` (San Francisco)."""
    from api.contacts.service import valid_phone

    while True:
        number = f"+1415{random.randint(2_000_000, 9_999_999)}"
        if valid_phone(number) == number:
            return number


async def create_contact(client: Any, tenant: Any, **body: Any) -> str:
    if "email" not in body and "phone" not in body:
        body["email"] = unique_email()
    response = await client.post(CONTACTS, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["contact_id"])


async def get_contact(client: Any, tenant: Any, contact_id: str) -> dict[str, Any]:
    response = await client.get(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["contact"]


async def error_of(response: Any) -> str:
    body = await response.get_json()
    assert body["status"] == "error", body
    assert set(body["error"]) >= {"code", "message"}
    return str(body["error"]["code"])


async def tenant_sql(pool: asyncpg.Pool, tenant: Any, statement: str, *args: Any) -> Any:
    """Run one statement in the tenant's schema (to arrange what the API cannot, or to look)."""
    from tenancy.db import tenant_transaction

    async with tenant_transaction(pool, tenant.schema) as conn:
        return await conn.fetch(statement, *args)


async def make_member(client: Any, mailbox: Any, tenant: Any) -> uuid.UUID:
    """A user who accepted an invitation to `tenant`: an active member."""
    email = unique_email("member")
    response = await client.post(
        "/functions/v1/crm-api/add-subaccount-user",
        json={"email": email, "role": "sub_account_user", "sub_account_id": str(tenant.id)},
        headers=tenant.organisation.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    text = mailbox.to(email)[-1].get_payload(decode=True).decode()
    token = re.search(r"Invitation token: (\S+)", text).group(1)  # type: ignore[union-attr]
    response = await client.post("/functions/v1/accept-invitation", json={"token": token})
    assert response.status_code == 200, await response.get_data(as_text=True)
    return uuid.UUID((await response.get_json())["user_id"])


@pytest.fixture
async def member(client: Any, mailbox: Any, tenant: Any) -> uuid.UUID:
    return await make_member(client, mailbox, tenant)


# --- a loopback webhook receiver ---------------------------------------------------------------


class Receiver:
    """Records every request; answers the scripted statuses first, then 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.statuses: list[int] = []
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> Receiver:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/hook"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = {name.strip().lower(): value.strip() for name, _, value in
                       (line.partition(":") for line in head[1:] if ":" in line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests.append((headers, body))
            status = self.statuses.pop(0) if self.statuses else 200
            writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                         .encode())
            await writer.drain()
        finally:
            writer.close()


def signature_verifies(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks verification, from the spec."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(expected, part.split(",", 1)[1])
               for part in headers["webhook-signature"].split() if part.startswith("v1,"))


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    server = await Receiver().start()
    yield server
    assert server.server is not None
    server.server.close()
    await server.server.wait_closed()
