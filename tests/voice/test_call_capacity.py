"""A sub-account's calls beyond its plan's max_concurrent_calls wait, queued, and start oldest
first; a call whose voice runtime cannot be reached ends `failed`, never on the line forever."""

from __future__ import annotations

from typing import Any

import pytest

from tests.calls.test_calls import place, wait_for_end
from tests.conftest import running_worker
from tests.factories import create_plan, make_contact, make_tenant
from tests.helpers import closed_port
from tests.voice.test_call_scripts import MACHINE, PERSON, ready, stored

pytestmark = pytest.mark.voice_e2e

# An answering machine's greeting and beep, then the message: a call of about seven seconds.
LEAVE_A_MESSAGE = {"voicemail_detection": True, "voicemail_type": "leave_message",
                   "voicemail_message": "Call us back."}


async def test_calls_beyond_the_plans_limit_wait_and_start_in_order(client, pool, agency,
                                                                    worker) -> None:
    plan = await create_plan(client, agency.headers, name="Two lines", max_concurrent_calls=2)
    tenant = await make_tenant(client, agency, plan=plan["slug"])
    agent_id = await ready(client, tenant, **LEAVE_A_MESSAGE)
    contact_id = await make_contact(client, tenant, phone=MACHINE)
    call_ids = []
    for _ in range(3):
        response = await place(client, tenant, contact_id, agent_id)
        call_ids.append((await response.get_json())["call_id"])
    calls = [await wait_for_end(client, tenant, call_id) for call_id in call_ids]
    assert [call["status"] for call in calls] == ["completed"] * 3
    assert [call["ended_reason"] for call in calls] == ["voicemail"] * 3
    # Two on the line at once; the third, queued, started once one of them had ended.
    first, second, third = calls
    assert second["started_at"] < first["ended_at"]
    assert third["started_at"] >= min(first["ended_at"], second["ended_at"])


async def test_a_voice_runtime_out_of_reach_fails_the_call_at_once(
        client, pool, tenant, migrated, servers, worker_env, vendors) -> None:
    worker_env(SWITCHBOARD_VOICE_URL=f"ws://127.0.0.1:{closed_port()}")
    async with running_worker(migrated, servers.redis_url):
        agent_id = await ready(client, tenant)
        contact_id = await make_contact(client, tenant, phone=PERSON)
        response = await place(client, tenant, contact_id, agent_id)
        call = await wait_for_end(client, tenant, (await response.get_json())["call_id"])
    record: dict[str, Any] = await stored(pool, tenant, call["id"])
    assert call["status"] == "failed" and record["ended_reason"] == "failed"
    assert record["error"].startswith("voice_unavailable: ")
    assert call["cost"] == 0 and not vendors.requests
