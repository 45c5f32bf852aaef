"""The `switchboard` commands as an operator runs them: real processes, real servers."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import asyncpg
import httpx
import pytest
from arq import create_pool as create_arq_pool
from arq.connections import RedisSettings

from tenancy.embedded import free_port

SWITCHBOARD = [sys.executable, "-m", "cli"]


def _env(servers, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
        **extra,
    }


def test_create_organisation_prints_id_and_agency_key(servers, pool, migrated) -> None:
    done = subprocess.run(
        [
            *SWITCHBOARD,
            "create-organisation",
            "--name",
            "CLI Agency",
            "--plan-type",
            "saas",
            "--max-sub-accounts",
            "3",
            "--inactive",
        ],
        env=_env(servers),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert set(printed) == {"organisation_id", "agency_api_key"}
    assert printed["agency_api_key"].startswith("sb_")

    async def row() -> asyncpg.Record:
        conn = await asyncpg.connect(servers.direct_url)  # not PgBouncer: a named statement
        try:
            return await conn.fetchrow(
                "SELECT name, plan_type, max_sub_accounts, is_active FROM control.organisations "
                "WHERE id = $1",
                uuid.UUID(printed["organisation_id"]),
            )
        finally:
            await conn.close()

    stored = asyncio.run(row())
    assert dict(stored) == {
        "name": "CLI Agency",
        "plan_type": "saas",
        "max_sub_accounts": 3,
        "is_active": False,
    }


async def test_worker_command_runs_a_job_and_exits(servers, migrated) -> None:
    arq = await create_arq_pool(RedisSettings.from_dsn(servers.redis_url))
    job = await arq.enqueue_job("ping", "cli")
    process = await asyncio.create_subprocess_exec(
        *SWITCHBOARD,
        "worker",
        "--burst",
        env=_env(servers),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, stderr.decode()
    assert await job.result(timeout=5) == "pong:cli"
    await arq.aclose()


def _wait_healthy(url: str, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"process exited early: {process.stderr.read()}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("service did not become healthy")


def test_serve_answers_and_stops_gracefully_on_sigterm(servers, migrated) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*SWITCHBOARD, "serve", "--port", str(port)],
        env=_env(servers),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/healthz", process)
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert ready.status_code == 200 and ready.json()["checks"] == {
            "database": "ok",
            "redis": "ok",
        }
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()


@pytest.fixture
def empty_database(servers):
    name = f"sbdev_{uuid.uuid4().hex[:10]}"

    async def run(statement: str) -> None:
        conn = await asyncpg.connect(servers.admin_url)
        await conn.execute(statement)
        await conn.close()

    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    base = servers.database_url.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_dev_migrates_creates_demo_data_and_serves_the_printed_curl(
    servers, empty_database, tmp_path
) -> None:
    port = free_port()
    # Behind PgBouncer, the direct URL (migrations, LISTEN) must name the same database.
    direct = servers.direct_url.rsplit("/", 1)[0] + "/" + empty_database.rsplit("/", 1)[1]
    env = _env(
        servers,
        DATABASE_URL=empty_database,
        SWITCHBOARD_DIRECT_DATABASE_URL=direct,
        SWITCHBOARD_DATA_DIR=str(tmp_path),
        SWITCHBOARD_VOICE_URL=f"ws://127.0.0.1:{free_port()}",
    )
    # No pepper or secrets key: dev makes random ones, kept in the data dir for the restart.
    env.pop("SWITCHBOARD_KEY_PEPPER", None)
    env.pop("SWITCHBOARD_SECRETS_KEY", None)
    process = subprocess.Popen(
        [*SWITCHBOARD, "dev", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/healthz", process, 90)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        output = process.stderr.read()
        key = re.search(r"sub-account key:\s+(sb_\S+)", output)
        assert key and "agency key:" in output and "curl -H 'x-api-key:" in output
    finally:
        if process.poll() is None:
            process.kill()
    assert (tmp_path / "dev-secrets.json").exists()
    # An organisation made beside it (same folder, same unset settings) gets a key dev accepts.
    done = subprocess.run(
        [*SWITCHBOARD, "create-organisation", "--name", "Beside dev"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    agency_key = json.loads(done.stdout)["agency_api_key"]
    # Start again: the demo data is kept and the printed key still works.
    process = subprocess.Popen(
        [*SWITCHBOARD, "dev", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/healthz", process, 90)
        answer = httpx.get(
            f"http://127.0.0.1:{port}/webhooks/inbound/team-users",
            headers={"x-api-key": key.group(1)},
            timeout=5,
        )
        assert answer.status_code == 200 and answer.json()["status"] == "success"
        answer = httpx.get(
            f"http://127.0.0.1:{port}/functions/v1/agency/sub-accounts",
            headers={"x-api-key": agency_key},
            timeout=5,
        )
        assert answer.status_code == 200, answer.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        # It cannot show the keys again, and says how to get new ones.
        again = process.stderr.read()
        assert "sub-account key:" not in again
        assert "For new keys" in again and "switchboard create-organisation" in again
    finally:
        if process.poll() is None:
            process.kill()


def test_dev_prints_a_call_that_works_without_vendor_keys(
    servers, empty_database, tmp_path
) -> None:
    """The README's first call: dev's banner curl places a sandbox call that is a conversation
    through the fake vendors: the agent looks for a free slot, offers it and books it on the
    demo calendar, and the call shows its transcript, tool calls, recording and analysis."""
    port = free_port()
    direct = servers.direct_url.rsplit("/", 1)[0] + "/" + empty_database.rsplit("/", 1)[1]
    env = _env(
        servers,
        DATABASE_URL=empty_database,
        SWITCHBOARD_DIRECT_DATABASE_URL=direct,
        SWITCHBOARD_DATA_DIR=str(tmp_path),
        SWITCHBOARD_VOICE_URL=f"ws://127.0.0.1:{free_port()}",
    )
    for name in [key for key in env if key.endswith("_BASE_URL")] + ["SWITCHBOARD_PUBLIC_URL"]:
        env.pop(name, None)
    log = tmp_path / "dev.stderr"
    process = subprocess.Popen(
        [*SWITCHBOARD, "dev", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    try:
        deadline = time.monotonic() + 120
        while not (
            found := re.search(
                r"curl -X POST -H 'x-api-key: (\S+)' .* -d '(\{.*\})' "
                r"(\S+/call)",
                log.read_text(),
            )
        ):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        key, body, url = found.groups()
        headers = {"x-api-key": key}
        placed = httpx.post(
            url, content=body, timeout=10, headers={**headers, "content-type": "application/json"}
        )
        assert placed.status_code == 200, placed.text
        call_url = f"http://127.0.0.1:{port}/webhooks/inbound/calls/{placed.json()['call_id']}"
        for _ in range(600):
            call = httpx.get(call_url, headers=headers, timeout=10).json()["call"]
            if call["status"] in ("completed", "failed"):
                break
            time.sleep(0.2)
        assert call["status"] == "completed", call
        # The agent offers the first free slot it found and books it once the contact agrees.
        lines = call["transcript"].splitlines()
        assert lines[:3] == [
            "Contact: Hello?",
            "Agent: Hi, this is Sam from Demo Agency. Do you have a minute?",
            "Contact: Yes, I have a minute.",
        ]
        assert re.fullmatch(
            r"Agent: The first free time is \w+ \d+ \w+ at \d\d:\d\d\. "
            r"Shall I book it\?",
            lines[3],
        ), lines
        assert lines[4] == "Contact: That sounds good."
        assert re.fullmatch(r"Agent: You are booked for \w+ \d+ \w+ at \d\d:\d\d\.", lines[5])
        assert lines[3].split(" is ")[1][: -len(". Shall I book it?")] == lines[5][26:-1]
        assert [(t["name"], t["status"]) for t in call["tool_calls"]] == [
            ("check_availability", "succeeded"),
            ("book_appointment", "succeeded"),
        ]
        booked = call["tool_calls"][1]
        assert booked["arguments"] == {
            "start": call["tool_calls"][0]["result"]["slots"][0]["start"]
        }
        recording = httpx.get(call["recording_url"], timeout=10)
        assert recording.status_code == 200
        assert recording.headers["content-type"] == "audio/wav"
        # The appointment is on the demo calendar, booked by the agent on this call.
        base = f"http://127.0.0.1:{port}/webhooks/inbound"
        tools = httpx.get(f"{base}/tools", headers=headers, timeout=10).json()["tools"]
        calendars = httpx.get(f"{base}/calendars", headers=headers, timeout=10).json()["calendars"]
        assert sorted(tool["type"] for tool in tools) == ["book_appointment", "check_availability"]
        assert {tool["config"]["calendar_id"] for tool in tools} == {calendars[0]["id"]}
        shown = httpx.get(
            f"{base}/appointments/{booked['result']['appointment_id']}", headers=headers, timeout=10
        )
        assert shown.status_code == 200, shown.text
        appointment = shown.json()["appointment"]
        assert (appointment["status"], appointment["source"]) == ("booked", "agent")
        assert appointment["call_id"] == call["id"]
        assert appointment["calendar_id"] == calendars[0]["id"]
        assert appointment["start"] == booked["arguments"]["start"]
        # The worker analyses the call after it ends.
        for _ in range(300):
            call = httpx.get(call_url, headers=headers, timeout=10).json()["call"]
            if call["analysis"] and call["analysis"]["status"] != "pending":
                break
            time.sleep(0.2)
        analysis = call["analysis"]
        assert (analysis["status"], analysis["success"]) == ("completed", True), analysis
        assert analysis["data"] == {"booked": True, "interested": True, "first_words": "Hello?"}
        assert analysis["summary"]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
