"""A sub-account's calls beyond its plan's max_concurrent_calls wait, queued, and start oldest
first; a voice process at its SWITCHBOARD_VOICE_MAX_CALLS refuses the next stream of a valid
call (1013), the call stays `queued`, and the sandbox carrier dials again until a place is free,
in that process or another of `--processes`; connections that never name a call do not take a
place, so they cannot keep a real call out (CONTRACT 11); a call whose voice runtime cannot be
reached ends `failed`, never on the line forever."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from integrations.telephony.sandbox_media import stream_url
from tenancy.embedded import free_port
from tests.calls.test_calls import place, wait_for_end
from tests.conftest import running_worker
from tests.factories import create_plan, make_contact, make_tenant
from tests.helpers import closed_port, tenant_sql, voice_process
from tests.voice.test_call_scripts import MACHINE, PERSON, ready, said, stored, voice_metrics
from tests.voice.test_runtime_admission import closed_with, start_message

pytestmark = pytest.mark.voice_e2e

# An answering machine's greeting and beep, then the message: a call of about seven seconds.
LEAVE_A_MESSAGE = {
    "voicemail_detection": True,
    "voicemail_type": "leave_message",
    "voicemail_message": "Call us back.",
}


async def test_calls_beyond_the_plans_limit_wait_and_start_in_order(
    client, pool, agency, worker
) -> None:
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
    client, pool, tenant, migrated, servers, worker_env, vendors
) -> None:
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
    with voice_process(
        port, {**vendors.env, "SWITCHBOARD_VOICE_URL": url, **settings}, folder / "voice.log"
    ):
        yield url


async def two_voicemails(
    client: Any, tenant: Any, migrated: str, redis_url: str, worker_env: Any, url: str
) -> list[dict[str, Any]]:
    worker_env(SWITCHBOARD_VOICE_URL=url)
    async with running_worker(migrated, redis_url):
        agent_id = await ready(client, tenant, **LEAVE_A_MESSAGE)
        contact_id = await make_contact(client, tenant, phone=MACHINE)
        call_ids = [
            (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
            for _ in range(2)
        ]
        calls = [await wait_for_end(client, tenant, call_id) for call_id in call_ids]
    assert [call["status"] for call in calls] == ["completed"] * 2, calls
    assert [call["ended_reason"] for call in calls] == ["voicemail"] * 2
    assert all("Call us back." in (call["transcript"] or "") for call in calls)
    return sorted(calls, key=lambda call: call["started_at"])


async def test_a_runtime_at_its_call_limit_refuses_the_next_stream_until_a_place_is_free(
    client, pool, tenant, migrated, servers, worker_env, vendors, tmp_path
) -> None:
    with own_runtime(vendors, tmp_path, SWITCHBOARD_VOICE_MAX_CALLS="1") as url:
        worker_env(SWITCHBOARD_VOICE_URL=url)
        async with running_worker(migrated, servers.redis_url):
            agent_id = await ready(client, tenant, **LEAVE_A_MESSAGE)
            contact_id = await make_contact(client, tenant, phone=MACHINE)
            call_ids = [
                (await (await place(client, tenant, contact_id, agent_id)).get_json())["call_id"]
                for _ in range(2)
            ]
            # Both calls' statuses, read together (one snapshot), until both have ended.
            seen: list[tuple[str, str]] = []
            forged = None
            while not seen or set(seen[-1]) - {"completed", "failed"}:
                rows = await tenant_sql(
                    pool,
                    tenant,
                    "SELECT id::text, status FROM calls WHERE id = ANY($1::uuid[])",
                    call_ids,
                )
                statuses = dict(tuple(row) for row in rows)
                seen.append((statuses[call_ids[0]], statuses[call_ids[1]]))
                if forged is None and sorted(seen[-1]) == ["in_progress", "queued"]:
                    # The place is taken: a stream with a forged token is still refused as not
                    # a call of ours (1008), not as busy (1013): it was never counted.
                    forged = await closed_with(
                        stream_url(url),
                        start_message(
                            {
                                "call_id": str(uuid.uuid4()),
                                "sub_account_id": str(tenant.id),
                                "token": "0" * 64,
                            }
                        ),
                    )
                assert len(seen) < 1200, seen
                await asyncio.sleep(0.05)
            calls = sorted(
                [await wait_for_end(client, tenant, call_id) for call_id in call_ids],
                key=lambda call: call["started_at"],
            )
        metrics = await voice_metrics(SimpleNamespace(url=url))
    assert [call["status"] for call in calls] == ["completed"] * 2, calls
    assert [call["ended_reason"] for call in calls] == ["voicemail"] * 2
    assert all("Call us back." in (call["transcript"] or "") for call in calls)
    first, second = calls
    # One call at a time: the second was refused (1013) and dialled again until the first ended.
    assert second["started_at"] >= first["ended_at"]
    assert metrics["switchboard_voice_streams_busy_total[]"] >= 1
    # Never both in progress; the refused call waited `queued`, never `in_progress`, while the
    # other talked.
    assert ("in_progress", "in_progress") not in seen
    assert {"in_progress", "queued"} in [set(pair) for pair in seen], seen
    assert forged == 1008


async def test_voice_processes_share_the_port_and_each_takes_its_own_calls(
    client, tenant, migrated, servers, worker_env, vendors, tmp_path
) -> None:
    with own_runtime(
        vendors, tmp_path, SWITCHBOARD_VOICE_MAX_CALLS="1", SWITCHBOARD_VOICE_PROCESSES="2"
    ) as url:
        first, second = await two_voicemails(
            client, tenant, migrated, servers.redis_url, worker_env, url
        )
    # Each process takes one call: both were on the line at once.
    assert second["started_at"] < first["ended_at"]


async def unnamed_connections(
    url: str, count: int, codes: list[int | None], stop: asyncio.Event
) -> None:
    """`count` connections at all times that send only `connected`, every second, as a client
    that never names a call would; each closed is opened again, its close code kept."""

    async def one() -> None:
        while not stop.is_set():
            async with connect(url, open_timeout=10) as ws:
                with contextlib.suppress(ConnectionClosed):
                    while not stop.is_set():
                        await ws.send(
                            json.dumps(
                                {"event": "connected", "protocol": "Call", "version": "1.0.0"}
                            )
                        )
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(stop.wait(), 1.0)
                if ws.close_code is not None:
                    codes.append(ws.close_code)

    await asyncio.gather(*(one() for _ in range(count)))


async def test_connections_that_never_name_a_call_do_not_keep_a_real_call_out(
    client, pool, tenant, migrated, servers, worker_env, vendors, tmp_path
) -> None:
    with own_runtime(vendors, tmp_path, SWITCHBOARD_VOICE_MAX_CALLS="2") as url:
        codes: list[int | None] = []
        stop = asyncio.Event()
        flood = asyncio.create_task(unnamed_connections(stream_url(url), 25, codes, stop))
        try:
            health = url.replace("ws://", "http://") + "/health"
            async with httpx.AsyncClient(timeout=5) as http:
                for _ in range(100):
                    status = (await http.get(health)).json()
                    if status["pending"] >= 25:
                        break
                    await asyncio.sleep(0.1)
            # 25 connections open, more than the call limit, none of them on a place.
            assert status["pending"] >= 25 and status["calls"] == 0, status
            worker_env(SWITCHBOARD_VOICE_URL=url)
            async with running_worker(migrated, servers.redis_url):
                agent_id = await ready(client, tenant)
                contact_id = await make_contact(client, tenant, phone=PERSON)
                response = await place(client, tenant, contact_id, agent_id)
                call_id = (await response.get_json())["call_id"]
                call = await wait_for_end(client, tenant, call_id)
        finally:
            stop.set()
            await flood
    record = await stored(pool, tenant, call_id)
    [row] = await tenant_sql(
        pool, tenant, "SELECT created_at, started_at FROM calls WHERE id = $1", call_id
    )
    # Answered in its normal time (the worker's pick-up, placing and dialling: about a second),
    # its whole conversation held.
    assert (row["started_at"] - row["created_at"]).total_seconds() < 5, row
    assert call["status"] == "completed" and record["ended_reason"] == "customer_hangup"
    assert [text for role, text in said(record["messages"]) if role == "contact"] == [
        "Hello?",
        "Yes, I have a minute.",
        "That sounds good.",
        "Thank you, goodbye.",
    ]
    assert call["transcript"].startswith("Contact: Hello?\nAgent: ")
    # The flood's connections were each closed for naming no call (after AUTH_SECONDS).
    assert codes and set(codes) == {1008}, codes
