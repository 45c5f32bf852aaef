"""Helpers for the foundation tests: agencies with given limits, plans, email configs, counts."""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

CREATE = "/functions/v1/create-subaccount-webhook"
ADD_USER = "/functions/v1/crm-api/add-subaccount-user"
ACCEPT = "/functions/v1/accept-invitation"
PLANS = "/functions/v1/agency/plans"
SUB_ACCOUNTS = "/functions/v1/agency/sub-accounts"


def unique_email(prefix: str = "user") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}@example.com"


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class NewAgency:
    id: uuid.UUID
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.key}


async def new_agency(pool: asyncpg.Pool, *, plan_type: str = "white_label",
                     max_sub_accounts: int = 100, is_active: bool = True) -> NewAgency:
    """An organisation with the given plan type, limit and state, and its agency key."""
    from tenancy.organisations import create_organisation

    organisation_id, key = await create_organisation(
        pool, f"Agency {uuid.uuid4().hex[:8]}", plan_type, max_sub_accounts, is_active)
    return NewAgency(organisation_id, key)


async def count_sub_accounts(pool: asyncpg.Pool, organisation_id: uuid.UUID | None = None) -> int:
    if organisation_id is None:
        return int(await pool.fetchval("SELECT count(*) FROM control.sub_accounts"))
    return int(await pool.fetchval(
        "SELECT count(*) FROM control.sub_accounts WHERE organisation_id = $1", organisation_id))


async def set_email_config(pool: asyncpg.Pool, organisation_id: uuid.UUID, host: str, port: int,
                           from_address: str) -> None:
    await pool.execute(
        """INSERT INTO control.email_configs (organisation_id, host, port, from_address)
           VALUES ($1, $2, $3, $4)
           ON CONFLICT (organisation_id) DO UPDATE
           SET host = EXCLUDED.host, port = EXCLUDED.port, from_address = EXCLUDED.from_address""",
        organisation_id, host, port, from_address)


async def create_sub_account(client: Any, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    body.setdefault("email", unique_email("owner"))
    if "name" not in body and "locationID" not in body:
        body["name"] = f"Tenant {uuid.uuid4().hex[:8]}"
    response = await client.post(CREATE, json=body, headers=headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return await response.get_json()  # type: ignore[no-any-return]


async def create_plan(client: Any, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    body.setdefault("slug", f"plan-{uuid.uuid4().hex[:8]}")
    body.setdefault("name", "Plan")
    response = await client.post(PLANS, json=body, headers=headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["plan"]  # type: ignore[no-any-return]


async def issue_key(client: Any, headers: dict[str, str], sub_account_id: str) -> str:
    response = await client.post(f"{SUB_ACCOUNTS}/{sub_account_id}/api-keys", headers=headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["api_key"]  # type: ignore[no-any-return]


def token_in(message: Any) -> str:
    """The invitation token printed in an invitation email."""
    text = email_text(message)
    for line in text.splitlines():
        if line.startswith("Invitation token:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no token in the email: {text!r}")


def email_text(message: Any) -> str:
    if message.is_multipart():
        return str(message.get_payload(0).get_payload(decode=True).decode())
    return str(message.get_payload(decode=True).decode())
