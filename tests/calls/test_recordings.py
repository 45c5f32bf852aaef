"""Call recordings: finish_call keeps the WAV, GET /calls/{id} shows a signed link, and the link
serves the same bytes with no API key, until it expires, only for its own call, only while the
sub-account is active; purging the sub-account deletes its recordings."""

from __future__ import annotations

import io
import json
import uuid
import wave
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from api.calls.service import finish_call
from integrations.recordings import recording_key
from integrations.telephony import CallState
from tenancy import tenant_ops
from tenancy.recording_links import recording_url
from tenancy.recordings import recording_store
from tenancy.scope import TenantScope
from tenancy.settings import get_settings
from tests.factories import make_agent, make_contact
from tests.helpers import expect_error, tenant_sql

CALLS = "/webhooks/inbound/calls"
STARTED = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
MESSAGES = [
    {"role": "contact", "text": "Hello?", "start_seconds": 0.4},
    {"role": "agent", "text": "Hi, this is Switchboard.", "start_seconds": 1.2},
]


def make_wav(seconds: float = 0.5) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as audio:
        audio.setnchannels(2)
        audio.setsampwidth(2)
        audio.setframerate(8000)
        audio.writeframes(bytes(range(256)) * int(seconds * 8000 * 4 / 256))
    return out.getvalue()


@pytest.fixture(params=["file", "s3"])
def recordings(request: pytest.FixtureRequest, worker_env: Any, tmp_path: Path) -> str:
    """The recordings store under test: files in this test's data dir, or a fresh bucket on
    the local S3 server."""
    worker_env(SWITCHBOARD_DATA_DIR=str(tmp_path))
    if request.param == "s3":
        s3 = request.getfixturevalue("s3_server")
        worker_env(
            SWITCHBOARD_RECORDINGS="s3",
            SWITCHBOARD_RECORDINGS_S3_BUCKET=s3.new_bucket(),
            SWITCHBOARD_RECORDINGS_S3_ENDPOINT_URL=s3.endpoint_url,
            SWITCHBOARD_RECORDINGS_S3_REGION=s3.region,
        )
    return str(request.param)


@pytest.fixture
def file_recordings(worker_env: Any, tmp_path: Path) -> Path:
    worker_env(SWITCHBOARD_DATA_DIR=str(tmp_path))
    return tmp_path / "recordings"


async def open_call(client: Any, pool: Any, tenant: Any, **agent: Any) -> uuid.UUID:
    """A call as the worker leaves it before it ends (no worker runs here to advance it)."""
    agent_id = await make_agent(client, tenant, **agent)
    contact_id = await make_contact(client, tenant)
    rows = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO calls (contact_id, agent_id, from_number, to_number, "
        "provider, status, started_at) VALUES ($1, $2, '+14155550123', '+14155552671', "
        "'sandbox', 'in_progress', $3) RETURNING id",
        uuid.UUID(contact_id),
        uuid.UUID(agent_id),
        STARTED,
    )
    return rows[0]["id"]  # type: ignore[no-any-return]


def ended(recording: bytes | None, **fields: Any) -> CallState:
    values: dict[str, Any] = {
        "started_at": STARTED,
        "ended_at": STARTED + timedelta(seconds=42),
        "duration_seconds": 42,
        "transcript": "Contact: Hello?\nAgent: Hi, this is Switchboard.",
        "ended_reason": "customer_hangup",
        "answered_by": "human",
        "messages": MESSAGES,
        "recording": recording,
    }
    values.update(fields)
    return CallState("completed", **values)


async def finished_call(
    client: Any, pool: Any, tenant: Any, wav: bytes | None, **agent: Any
) -> uuid.UUID:
    call_id = await open_call(client, pool, tenant, **agent)
    await finish_call(TenantScope.of_sub_account(pool, tenant.id), call_id, ended(wav))
    return call_id


async def read_call(client: Any, tenant: Any, call_id: uuid.UUID) -> dict[str, Any]:
    response = await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["call"]  # type: ignore[no-any-return]


def local(url: str) -> str:
    """The link's path and query, as the test client takes them."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


# --- the link ---------------------------------------------------------------------------------


async def test_finished_call_recording_downloads_by_its_link_without_a_key(
    client: Any, pool: Any, tenant: Any, recordings: str
) -> None:
    wav = make_wav()
    call_id = await finished_call(client, pool, tenant, wav)

    call = await read_call(client, tenant, call_id)
    response = await client.get(local(call["recording_url"]))

    assert call["recording_url"].startswith(
        f"{get_settings().public_url}/recordings/{tenant.id}/{call_id}.wav?expires="
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "audio/wav"
    assert await response.get_data() == wav
    assert "no-store" in response.headers["Cache-Control"]


async def test_get_call_shows_the_contract_fields(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    call_id = await finished_call(client, pool, tenant, make_wav())

    call = await read_call(client, tenant, call_id)

    assert {
        key: call[key]
        for key in (
            "direction",
            "ended_reason",
            "answered_by",
            "messages",
            "cost",
            "error",
            "status",
            "duration_seconds",
        )
    } == {
        "direction": "outbound",
        "ended_reason": "customer_hangup",
        "answered_by": "human",
        "messages": MESSAGES,
        "cost": 0,
        "error": None,
        "status": "completed",
        "duration_seconds": 42,
    }


async def test_call_without_recording_has_null_recording_url(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    call_id = await finished_call(client, pool, tenant, None, recording=False)

    assert (await read_call(client, tenant, call_id))["recording_url"] is None
    assert await recording_store().keys(tenant.id) == []


async def test_post_call_webhook_carries_the_signed_link(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    wav = make_wav()
    call_id = await finished_call(
        client, pool, tenant, wav, webhook=True, webhook_url="http://127.0.0.1:9/post-call"
    )

    rows = await tenant_sql(
        pool, tenant, "SELECT body FROM webhook_deliveries WHERE event_type = 'call.completed'"
    )
    data = json.loads(rows[0]["body"])["data"]
    assert data["call"]["id"] == str(call_id)
    assert await (await client.get(local(data["call"]["recording_url"]))).get_data() == wav


async def test_link_answers_a_range_with_206_and_head_with_the_length(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    wav = make_wav()
    call_id = await finished_call(client, pool, tenant, wav)
    link = local((await read_call(client, tenant, call_id))["recording_url"])

    part = await client.get(link, headers={"Range": "bytes=0-43"})
    head = await client.head(link)

    assert part.status_code == 206 and await part.get_data() == wav[:44]
    assert part.headers["Content-Range"] == f"bytes 0-43/{len(wav)}"
    # (The server, hypercorn, drops the body of a HEAD answer.)
    assert head.status_code == 200 and head.headers["Content-Length"] == str(len(wav))
    assert head.headers["Accept-Ranges"] == "bytes"


async def test_store_failure_keeps_the_call_without_its_recording(
    client: Any, pool: Any, tenant: Any, worker_env: Any, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    worker_env(SWITCHBOARD_DATA_DIR=str(blocker))

    call_id = await finished_call(client, pool, tenant, make_wav())

    call = await read_call(client, tenant, call_id)
    assert call["status"] == "completed" and call["recording_url"] is None
    rows = await tenant_sql(pool, tenant, "SELECT recording_key FROM calls WHERE id = $1", call_id)
    assert rows[0]["recording_key"] is None


# --- links that are not good ------------------------------------------------------------------


async def test_link_with_a_tampered_signature_is_403(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    call_id = await finished_call(client, pool, tenant, make_wav())
    link = local((await read_call(client, tenant, call_id))["recording_url"])
    flipped = link[:-1] + ("0" if link[-1] != "0" else "1")

    for bad in (flipped, link.split("?")[0], link.replace("signature=", "signature=x")):
        response = await client.get(bad)
        await expect_error(response, 403, "recording_link_invalid")


async def test_expired_link_is_403(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    call_id = await finished_call(client, pool, tenant, make_wav())
    old = recording_url(
        None, tenant.id, call_id, now=datetime.now(UTC) - timedelta(days=7, seconds=1)
    )

    await expect_error(await client.get(local(old)), 403, "recording_link_expired")


async def test_link_of_one_sub_account_does_not_open_another_ones_call(
    client: Any, pool: Any, tenant: Any, tenant_second: Any, file_recordings: Path
) -> None:
    call_id = await finished_call(client, pool, tenant, make_wav())
    link = local((await read_call(client, tenant, call_id))["recording_url"])

    # The genuine link moved to the other sub-account's path: the signature does not match.
    moved = link.replace(str(tenant.id), str(tenant_second.id))
    await expect_error(await client.get(moved), 403, "recording_link_invalid")
    # A genuine signature for the other sub-account and this call: no such call there.
    signed = local(recording_url(None, tenant_second.id, call_id))
    body = await expect_error(await client.get(signed), 404, "not_found")
    assert str(tenant.id) not in json.dumps(body)


async def test_unknown_call_or_call_without_recording_is_404(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    silent = await finished_call(client, pool, tenant, None)

    for call_id in (uuid.uuid4(), silent):
        response = await client.get(local(recording_url(None, tenant.id, call_id)))
        await expect_error(response, 404, "not_found")


async def test_recording_whose_file_is_gone_is_404(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    call_id = await finished_call(client, pool, tenant, make_wav())
    (file_recordings / str(tenant.id) / f"{call_id}.wav").unlink()

    response = await client.get(local(recording_url(None, tenant.id, call_id)))

    await expect_error(response, 404, "not_found")


async def test_link_with_ids_that_are_not_uuids_is_400(client: Any) -> None:
    response = await client.get(f"/recordings/x/{uuid.uuid4()}.wav?expires=1&signature=00")

    await expect_error(response, 400, "invalid_uuid")


async def test_recording_of_a_suspended_or_deleted_sub_account_is_404(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    call_id = await finished_call(client, pool, tenant, make_wav())
    link = local((await read_call(client, tenant, call_id))["recording_url"])

    await tenant_ops.suspend(pool, tenant.id)
    await expect_error(await client.get(link), 404, "not_found")
    await tenant_ops.resume(pool, tenant.id)
    assert (await client.get(link)).status_code == 200
    await tenant_ops.delete(pool, tenant.id)
    await expect_error(await client.get(link), 404, "not_found")


# --- purge ------------------------------------------------------------------------------------


async def test_purging_a_sub_account_deletes_its_recordings(
    client: Any, pool: Any, tenant: Any, tenant_second: Any, recordings: str
) -> None:
    call_id = await finished_call(client, pool, tenant, make_wav())
    kept = await finished_call(client, pool, tenant_second, make_wav())
    store = recording_store()
    assert await store.keys(tenant.id) == [recording_key(tenant.id, call_id)]

    await tenant_ops.delete(pool, tenant.id, grace_days=0)
    report = await tenant_ops.purge_due(pool)

    assert tenant.id in report.purged
    assert await store.keys(tenant.id) == []
    assert await store.get(recording_key(tenant.id, call_id)) is None
    assert await store.get(recording_key(tenant_second.id, kept)) is not None


# --- export and import ------------------------------------------------------------------------


async def exported(pool: Any, tenant: Any) -> list[str]:
    out = io.StringIO()
    await tenant_ops.export_tenant(pool, tenant.id, out)
    return out.getvalue().splitlines(keepends=True)


async def purged(pool: Any, tenant: Any) -> None:
    await tenant_ops.delete(pool, tenant.id, grace_days=0)
    assert tenant.id in (await tenant_ops.purge_due(pool)).purged


async def test_export_then_import_carries_the_recordings(
    client: Any, pool: Any, tenant: Any, recordings: str
) -> None:
    wav = make_wav()
    call_id = await finished_call(client, pool, tenant, wav)
    lines = await exported(pool, tenant)
    await purged(pool, tenant)
    assert await recording_store().keys(tenant.id) == []

    report = await tenant_ops.import_tenant(pool, lines)

    assert report.recordings == 1
    link = local((await read_call(client, tenant, call_id))["recording_url"])
    assert await (await client.get(link)).get_data() == wav


async def test_failed_import_leaves_no_recordings_behind(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    await finished_call(client, pool, tenant, make_wav())
    lines = await exported(pool, tenant)
    await purged(pool, tenant)
    trailer = json.loads(lines[-1])
    damaged = [*lines[:-1], json.dumps({**trailer, "rows": trailer["rows"] + 1}) + "\n"]

    with pytest.raises(tenant_ops.TenantOpError, match="damaged"):
        await tenant_ops.import_tenant(pool, damaged)

    assert await recording_store().keys(tenant.id) == []


async def test_import_refuses_a_recording_of_another_sub_account(
    client: Any, pool: Any, tenant: Any, file_recordings: Path
) -> None:
    await finished_call(client, pool, tenant, make_wav())
    lines = await exported(pool, tenant)
    await purged(pool, tenant)
    stranger = recording_key(uuid.uuid4(), uuid.uuid4())
    planted = [
        json.dumps({"recording": stranger, "wav_base64": ""}) + "\n"
        if line.startswith('{"recording"')
        else line
        for line in lines
    ]

    with pytest.raises(tenant_ops.TenantOpError, match="another sub-account"):
        await tenant_ops.import_tenant(pool, planted)

    assert await recording_store().get(stranger) is None
