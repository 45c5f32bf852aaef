"""A sub-account's calls beyond its plan's max_concurrent_calls wait, queued, and start oldest
first; a voice process at its SWITCHBOARD_VOICE_MAX_CALLS refuses the next stream (503) and the
sandbox carrier dials again until a place is free, in that process or another of
`--processes`; a call whose voice runtime cannot be reached ends `failed`, never on the line
forever."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tenancy.embedded import free_port
from tests.calls.test_calls import place, wait_for_end
from tests.conftest import running_worker
from tests.factories import create_plan, make_contact, make_tenant
from tests.helpers import closed_port, voice_process
from tests.voice.test_call_scripts import MACHINE, PERSON, ready, stored, voice_metrics

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


@contextlib.contextmanager
def own_runtime(vendors: Any, folder: Path, **settings: str) -> Iterator[str]:
    """A `switchboard voice` of this test's own, with `settings`; yields its URL."""
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    with voice_process(port, {**vendors.env, "SWITCHBOARD_VOICE_URL": url, **settings},
                       folder / "voice.log"):
        yield url


async def two_voicemails(client: Any, tenant: Any, migrated: str, redis_url: str,
                         worker_env: Any, url: str) -> list[dict[str, Any]]:
    worker_env(SWITCHBOARD_VOICE_URL=url)
    async with running_worker(migrated, redis_url):
        agent_id = await ready(client, tenant, **LEAVE_A_MESSAGE)
        contact_id = await make_contact(client, tenant, phone=MACHINE)
        call_ids = [(await (await place(client, tenant, contact_id, agent_id)).get_json())
                    ["call_id"] for _ in range(2)]
        calls = [await wait_for_end(client, tenant, call_id) for call_id in call_ids]
    assert [call["status"] for call in calls] == ["completed"] * 2, calls
    assert [call["ended_reason"] for call in calls] == ["voicemail"] * 2
    assert all("Call us back." in (call["transcript"] or "") for call in calls)
    return sorted(calls, key=lambda call: call["started_at"])


async def test_a_runtime_at_its_call_limit_refuses_the_next_stream_until_a_place_is_free(
        client, tenant, migrated, servers, worker_env, vendors, tmp_path) -> None:
    with own_runtime(vendors, tmp_path, SWITCHBOARD_VOICE_MAX_CALLS="1") as url:
        first, second = await two_voicemails(client, tenant, migrated, servers.redis_url,
                                             worker_env, url)
        metrics = await voice_metrics(SimpleNamespace(url=url))
    # One call at a time: the second was refused (503) and dialled again until the first ended.
    assert second["started_at"] >= first["ended_at"]
    assert metrics["switchboard_voice_streams_busy_total[]"] >= 1


async def test_voice_processes_share_the_port_and_each_takes_its_own_calls(
        client, tenant, migrated, servers, worker_env, vendors, tmp_path) -> None:
    with own_runtime(vendors, tmp_path, SWITCHBOARD_VOICE_MAX_CALLS="1",
                     SWITCHBOARD_VOICE_PROCESSES="2") as url:
        first, second = await two_voicemails(client, tenant, migrated, servers.redis_url,
                                             worker_env, url)
    # Each process takes one call: both were on the line at once.
    assert second["started_at"] < first["ended_at"]
