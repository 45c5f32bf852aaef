"""Scheduled calls (CONTRACT 10 `start_at`, 10a): POST /contacts/{id}/call with start_at creates
the call `scheduled`; the real worker places it through the sandbox carrier at its time, never
before, under the rules of that moment; POST /calls/{id}/cancel cancels it before."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from api.calls.service import CALL_WORK, advance_call
from integrations.telephony import Providers
from tenancy.clock import utcnow
from tests.calls.test_calls import CALLS, call_url, ready_agent, wait_for_end
from tests.conftest import running_worker
from tests.conversations.test_scheduled_messages import BAD_TIMES, bad_time
from tests.factories import make_agent, make_contact, priced_tenant
from tests.helpers import due_rows, expect_error, scope_of, snapshot, tenant_sql


def at(seconds: float) -> str:
    return (utcnow() + timedelta(seconds=seconds)).isoformat()


async def schedule(client: Any, tenant: Any, contact_id: str, agent_id: str, start_at: Any) -> Any:
    return await client.post(
        call_url(contact_id),
        json={"agent_id": agent_id, "start_at": start_at},
        headers=tenant.headers,
    )


async def scheduled(client: Any, tenant: Any, contact_id: str, agent_id: str, start_at: str) -> str:
    response = await schedule(client, tenant, contact_id, agent_id, start_at)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return str((await response.get_json())["call_id"])


async def get_call(client: Any, tenant: Any, call_id: str) -> dict[str, Any]:
    response = await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)
    return (await response.get_json())["call"]  # type: ignore[no-any-return]


async def cancel(client: Any, tenant: Any, call_id: str) -> Any:
    return await client.post(f"{CALLS}/{call_id}/cancel", headers=tenant.headers)


async def left_scheduled(client: Any, tenant: Any, call_id: str, start_at: str) -> dict[str, Any]:
    """The call once it left `scheduled` (a generous bound, not a timing); never before its
    start_at."""
    due = datetime.fromisoformat(start_at)
    async with asyncio.timeout(30):
        while True:
            call = await get_call(client, tenant, call_id)
            if utcnow() < due:
                assert call["status"] == "scheduled", call
            if call["status"] != "scheduled":
                return call
            await asyncio.sleep(0.05)


async def ready_without_worker(client: Any, tenant: Any, migrated: str, servers: Any) -> Any:
    """ready_agent (assigning a number needs the worker), then no worker: the test's own runs
    are the only ones."""
    async with running_worker(migrated, servers.redis_url):
        return await ready_agent(client, tenant)


async def run_once(pool: Any, tenant: Any, call_id: str) -> datetime | None:
    """One run of the call's due work, as the worker makes it."""
    providers = Providers("sandbox")
    try:
        return await advance_call(scope_of(pool, tenant), providers, uuid.UUID(call_id))
    finally:
        await providers.aclose()


# --- scheduling and placing -------------------------------------------------------------------


async def test_scheduled_call_is_listed_scheduled_then_placed_not_before_start_at(
    client, pool, tenant, worker
):
    agent_id, contact_id = await ready_agent(client, tenant)
    start_at = at(2)

    call_id = await scheduled(client, tenant, contact_id, agent_id, start_at)

    call = await get_call(client, tenant, call_id)
    assert (call["status"], call["started_at"], call["ended_reason"]) == ("scheduled", None, None)
    assert abs(datetime.fromisoformat(call["start_at"]) - datetime.fromisoformat(start_at)) < (
        timedelta(milliseconds=1)
    )
    listed = await client.get(f"{CALLS}?status=scheduled", headers=tenant.headers)
    assert [c["id"] for c in (await listed.get_json())["calls"]] == [call_id]

    placed = await left_scheduled(client, tenant, call_id, start_at)
    ended = await wait_for_end(client, tenant, call_id)

    assert placed["status"] in ("queued", "ringing", "in_progress", "completed")
    assert ended["status"] == "completed" and ended["ended_reason"] == "customer_hangup"
    assert datetime.fromisoformat(ended["started_at"]) >= datetime.fromisoformat(start_at)


async def test_a_run_before_start_at_waits_and_places_nothing(
    client, pool, tenant, migrated, servers
):
    agent_id, contact_id = await ready_without_worker(client, tenant, migrated, servers)
    call_id = await scheduled(client, tenant, contact_id, agent_id, at(3600))

    again = await run_once(pool, tenant, call_id)

    assert again is not None and again > utcnow() + timedelta(minutes=59)
    call = await get_call(client, tenant, call_id)
    assert (call["status"], call["started_at"]) == ("scheduled", None)


# --- the rules when it is due -----------------------------------------------------------------


async def revoke_call_consent(client: Any, tenant: Any, contact_id: str) -> None:
    response = await client.put(
        f"/webhooks/inbound/contacts/{contact_id}/consent",
        json={"channel": "call", "status": "revoked"},
        headers=tenant.headers,
    )
    assert response.status_code == 200


async def deactivate(client: Any, tenant: Any, agent_id: str) -> None:
    response = await client.patch(
        f"/webhooks/inbound/agents/{agent_id}", json={"is_active": False}, headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)


@pytest.mark.parametrize(
    ("change", "error"),
    [(revoke_call_consent, "contact_opted_out"), ("agent", "agent_inactive")],
)
async def test_a_rule_broken_meanwhile_fails_the_call_with_its_reason_unplaced(
    client, pool, tenant, worker, change, error
):
    agent_id, contact_id = await ready_agent(client, tenant)
    start_at = at(1.5)
    call_id = await scheduled(client, tenant, contact_id, agent_id, start_at)
    if change == "agent":
        await deactivate(client, tenant, agent_id)
    else:
        await change(client, tenant, contact_id)

    await left_scheduled(client, tenant, call_id, start_at)
    call = await wait_for_end(client, tenant, call_id)

    assert (call["status"], call["ended_reason"]) == ("failed", "failed")
    assert call["error"].startswith(f"{error}: "), call["error"]
    assert call["started_at"] is None and call["answered_by"] is None
    (row,) = await tenant_sql(
        pool, tenant, "SELECT provider_call_id FROM calls WHERE id = $1", uuid.UUID(call_id)
    )
    assert row["provider_call_id"] is None


async def test_funds_gone_meanwhile_fail_the_call_unplaced(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, credit=1, call_per_minute=0.25)
    agent_id, contact_id = await ready_agent(client, tenant)
    start_at = at(1.5)
    call_id = await scheduled(client, tenant, contact_id, agent_id, start_at)
    await tenant_sql(pool, tenant, "UPDATE wallet SET balance = 0.10 WHERE id = 1")

    await left_scheduled(client, tenant, call_id, start_at)
    call = await wait_for_end(client, tenant, call_id)

    assert call["status"] == "failed" and call["error"].startswith("insufficient_funds: ")
    assert call["started_at"] is None and call["cost"] == 0


# --- cancel -----------------------------------------------------------------------------------


async def test_cancel_before_start_is_200_cancelled_and_never_placed(client, pool, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant)
    start_at = at(1.5)
    call_id = await scheduled(client, tenant, contact_id, agent_id, start_at)

    response = await cancel(client, tenant, call_id)

    assert response.status_code == 200
    call = (await response.get_json())["call"]
    assert call["id"] == call_id and call["status"] == "cancelled"
    assert (call["started_at"], call["ended_reason"]) == (None, None)
    assert await due_rows(pool, [uuid.UUID(call_id)]) == []
    # A run queued before the cancel finds it cancelled and places nothing.
    assert await run_once(pool, tenant, call_id) is None
    await asyncio.sleep(max(0.0, (datetime.fromisoformat(start_at) - utcnow()).total_seconds()) + 1)
    call = await get_call(client, tenant, call_id)
    assert (call["status"], call["started_at"], call["ended_reason"]) == ("cancelled", None, None)
    listed = await client.get(f"{CALLS}?status=cancelled", headers=tenant.headers)
    assert [c["id"] for c in (await listed.get_json())["calls"]] == [call_id]


async def test_cancel_once_placed_is_409_not_cancellable(client, pool, tenant, worker):
    agent_id, contact_id = await ready_agent(client, tenant)
    start_at = at(1)
    call_id = await scheduled(client, tenant, contact_id, agent_id, start_at)
    async with asyncio.timeout(30):
        while True:
            if (await get_call(client, tenant, call_id))["status"] not in ("scheduled", "queued"):
                break
            await asyncio.sleep(0.05)

    await expect_error(await cancel(client, tenant, call_id), 409, "not_cancellable")

    call = await wait_for_end(client, tenant, call_id)
    assert call["status"] == "completed"


async def test_a_queued_call_not_yet_placed_can_be_cancelled(
    client, pool, tenant, migrated, servers
):
    agent_id, contact_id = await ready_without_worker(client, tenant, migrated, servers)
    response = await client.post(
        call_url(contact_id), json={"agent_id": agent_id}, headers=tenant.headers
    )
    call_id = (await response.get_json())["call_id"]

    response = await cancel(client, tenant, call_id)

    assert response.status_code == 200
    assert (await response.get_json())["call"]["status"] == "cancelled"
    assert await run_once(pool, tenant, call_id) is None
    assert (await get_call(client, tenant, call_id))["status"] == "cancelled"


async def test_cancel_of_a_missing_or_malformed_id_is_404_or_400(client, tenant):
    await expect_error(await cancel(client, tenant, str(uuid.uuid4())), 404, "not_found")
    await expect_error(await cancel(client, tenant, "not-a-uuid"), 400, "invalid_uuid")


async def test_another_sub_accounts_call_is_404_and_unchanged(
    client, pool, tenant, tenant_second, worker
):
    agent_id, contact_id = await ready_agent(client, tenant_second)
    call_id = await scheduled(client, tenant_second, contact_id, agent_id, at(3600))
    before = await snapshot(pool, tenant_second)

    await expect_error(await cancel(client, tenant, call_id), 404, "not_found")

    assert await snapshot(pool, tenant_second) == before
    assert (await get_call(client, tenant_second, call_id))["status"] == "scheduled"


# --- bad start_at -----------------------------------------------------------------------------


@pytest.mark.parametrize("start_at", BAD_TIMES)
async def test_bad_start_at_is_400_naming_it_and_nothing_is_written(client, pool, tenant, start_at):
    agent_id = await make_agent(client, tenant)
    contact_id = await make_contact(client, tenant)
    before = await snapshot(pool, tenant)

    body = await expect_error(
        await schedule(client, tenant, contact_id, agent_id, bad_time(start_at)),
        400,
        "validation_error",
    )

    assert "start_at" in [detail["field"] for detail in body["error"]["details"]], body
    assert await snapshot(pool, tenant) == before
    rows = await pool.fetch(
        "SELECT id FROM control.due_work WHERE kind = $1 AND sub_account_id = $2",
        CALL_WORK,
        tenant.id,
    )
    assert rows == []
