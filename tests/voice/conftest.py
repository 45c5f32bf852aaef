"""Voice fixtures: a running arq worker, loopback HTTP servers, factories for voice records."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config
from quart import Quart, Response, request

from tenancy.embedded import free_port
from tests.conftest import running_worker

AREA_CODE = "415"


@pytest.fixture
async def worker(migrated: str, servers: Any) -> AsyncIterator[Any]:
    """The real arq worker (not burst), running while the test's requests wait for jobs."""
    async with running_worker(migrated, servers.redis_url) as running:
        yield running


# --- loopback HTTP servers --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serving(app: Quart) -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1 for the duration of the block; yields its base URL."""
    config = Config()
    port = free_port()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    stop = asyncio.Event()
    task = asyncio.create_task(serve(app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            break
        except OSError:
            await asyncio.sleep(0.02)
    try:
        yield base
    finally:
        stop.set()
        await task


@dataclass
class Receiver:
    url: str
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A webhook receiver on loopback that records every POST and answers 204."""
    app = Quart("receiver")
    box = Receiver("")

    @app.post("/hook")
    async def hook() -> Response:
        box.received.append(({k.lower(): v for k, v in request.headers.items()},
                             await request.get_data(as_text=False)))
        box.arrived.set()
        return Response("", status=204)

    async with serving(app) as base:
        box.url = f"{base}/hook"
        yield box


# --- factories --------------------------------------------------------------------------------


def agent_body(tenant: Any, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "Sales agent", "voice_id": "alloy", "max_duration": 10, "temperature": 0.7,
        "silence_timeout": 5, "voice_activity_timeout": 300, "llm_model": "gpt-4o",
        "language": "en-US", "background_noise": False, "voicemail_detection": False,
        "backcchanneling": True, "organization_id": str(tenant.organisation.id),
        "sub_account_id": str(tenant.id), "webhook": False, "recording": True,
    }
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not ...}


async def connect(client: Any, tenant: Any, provider: str = "openai") -> None:
    response = await client.put(f"/webhooks/inbound/integrations/{provider}",
                                json={"api_key": f"sk-{uuid.uuid4().hex}"},
                                headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)


async def make_agent(client: Any, tenant: Any, **overrides: Any) -> str:
    await connect(client, tenant)
    response = await client.post("/functions/v1/crm-api/create-agent",
                                 json=agent_body(tenant, **overrides), headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["id"])


async def import_number(client: Any, tenant: Any, number: str) -> str:
    response = await client.post("/webhooks/inbound/phone-numbers/import",
                                 json={"phone_number": number}, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["phone_number"]["id"])


async def assign(client: Any, tenant: Any, number_id: str, agent_id: str) -> Any:
    return await client.post(f"/webhooks/inbound/phone-numbers/{number_id}/agent",
                             json={"agent_id": agent_id}, headers=tenant.headers)


async def make_contact(client: Any, tenant: Any, phone: str | None = "+14155552671",
                       email: str | None = None) -> str:
    body: dict[str, Any] = {"name": "Ada Lovelace"}
    if phone is not None:
        body["phone"] = phone
    body["email"] = email or f"ada-{uuid.uuid4().hex[:8]}@example.com"
    response = await client.post("/webhooks/inbound/contacts", json=body,
                                 headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["contact_id"])


async def table_rows(pool: Any, tenant: Any, sql: str, *args: Any) -> list[Any]:
    from tenancy.db import tenant_transaction

    async with tenant_transaction(pool, tenant.schema) as conn:
        return list(await conn.fetch(sql, *args))


async def balance(pool: Any, tenant: Any) -> float:
    rows = await table_rows(pool, tenant, "SELECT balance FROM wallet WHERE id = 1")
    return float(rows[0]["balance"])


async def priced_tenant(client: Any, agency: Any, *, credit: float | None = None,
                        **rebilling: float) -> Any:
    """A sub-account on a plan with these rebilling prices, its wallet credited."""
    from tests.conftest import make_tenant

    slug = f"plan-{uuid.uuid4().hex[:10]}"
    response = await client.post("/functions/v1/agency/plans", headers=agency.headers,
                                 json={"slug": slug, "name": "Voice plan",
                                       "rebilling": rebilling})
    assert response.status_code == 201, await response.get_data(as_text=True)
    created = await make_tenant(client, agency, plan=slug)
    if credit is not None:
        response = await client.post(
            f"/functions/v1/agency/sub-accounts/{created.id}/wallet/credit",
            json={"amount": credit}, headers=agency.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)
    return created
