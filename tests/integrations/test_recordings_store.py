"""The recordings store: files under the data dir, or objects in an S3 bucket (a real local S3
server, moto in server mode); both keep, read, list and purge a tenant's WAVs alike."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from integrations.recordings import (
    FileRecordingStore,
    RecordingStoreError,
    S3Config,
    S3RecordingStore,
    parse_key,
    recording_key,
)

WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(256)) * 4


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "file":
        return FileRecordingStore(tmp_path / "recordings")
    s3 = request.getfixturevalue("s3_server")
    return S3RecordingStore(S3Config(s3.new_bucket(), s3.endpoint_url, s3.region))


def new_key(sub_account_id: uuid.UUID | None = None) -> str:
    return recording_key(sub_account_id or uuid.uuid4(), uuid.uuid4())


async def test_put_then_get_returns_the_same_bytes(store: Any) -> None:
    key = new_key()

    await store.put(key, WAV)

    assert await store.get(key) == WAV


async def test_get_of_a_recording_never_kept_is_none(store: Any) -> None:
    assert await store.get(new_key()) is None


async def test_put_again_replaces_the_recording(store: Any) -> None:
    key = new_key()
    await store.put(key, b"first")

    await store.put(key, WAV)

    assert await store.get(key) == WAV


async def test_keys_lists_only_the_tenants_own_recordings(store: Any) -> None:
    tenant, other = uuid.uuid4(), uuid.uuid4()
    mine = sorted([new_key(tenant), new_key(tenant)])
    for key in [*mine, new_key(other)]:
        await store.put(key, WAV)

    assert await store.keys(tenant) == mine
    assert await store.keys(uuid.uuid4()) == []


async def test_delete_tenant_removes_its_recordings_and_no_others(store: Any) -> None:
    tenant, other = uuid.uuid4(), uuid.uuid4()
    gone, kept = new_key(tenant), new_key(other)
    await store.put(gone, WAV)
    await store.put(kept, WAV)

    await store.delete_tenant(tenant)

    assert await store.get(gone) is None and await store.keys(tenant) == []
    assert await store.get(kept) == WAV


async def test_delete_tenant_without_recordings_is_no_error(store: Any) -> None:
    await store.delete_tenant(uuid.uuid4())


# Fixed ids (the same in every process, as pytest-xdist's workers must collect alike).
A, B = "0b7e2f4a-5c1d-4e8f-9a6b-3c2d1e0f9a8b", "6d5c4b3a-2f1e-4d0c-8b9a-7f6e5d4c3b2a"


@pytest.mark.parametrize(
    "key",
    [
        "../etc/passwd",
        "a/b.wav",
        f"{A}/../{B}.wav",
        f"{A}/{B}.mp3",
        f"{A}/{B}.wav/x",
        f"/{A}/{B}.wav",
        f"{A.upper()}/{B}.wav",
        f"{A}/{B}.wav\n",
    ],
)
async def test_a_key_not_made_from_two_uuids_is_refused(store: Any, key: str) -> None:
    with pytest.raises(ValueError):
        await store.put(key, WAV)
    with pytest.raises(ValueError):
        await store.get(key)


def test_parse_key_gives_back_the_ids() -> None:
    sub_account_id, call_id = uuid.uuid4(), uuid.uuid4()

    assert parse_key(recording_key(sub_account_id, call_id)) == (sub_account_id, call_id)


async def test_file_is_written_whole_private_and_without_leftovers(tmp_path: Path) -> None:
    store = FileRecordingStore(tmp_path)
    sub_account_id, call_id = uuid.uuid4(), uuid.uuid4()

    await store.put(recording_key(sub_account_id, call_id), WAV)

    folder = tmp_path / str(sub_account_id)
    assert os.listdir(folder) == [f"{call_id}.wav"]
    assert (folder / f"{call_id}.wav").read_bytes() == WAV
    assert stat.S_IMODE((folder / f"{call_id}.wav").stat().st_mode) == 0o600


async def test_file_store_that_cannot_write_raises_its_own_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    store = FileRecordingStore(blocker)

    with pytest.raises(RecordingStoreError):
        await store.put(new_key(), WAV)


async def test_s3_store_that_cannot_be_reached_raises_its_own_error(s3_server: Any) -> None:
    from tenancy.embedded import free_port

    store = S3RecordingStore(S3Config("nowhere", f"http://127.0.0.1:{free_port()}", "us-east-1"))

    with pytest.raises(RecordingStoreError):
        await store.put(new_key(), WAV)
    with pytest.raises(RecordingStoreError):
        await store.get(new_key())


async def test_s3_bucket_that_does_not_exist_raises_its_own_error(s3_server: Any) -> None:
    store = S3RecordingStore(
        S3Config(f"missing-{uuid.uuid4().hex[:8]}", s3_server.endpoint_url, s3_server.region)
    )

    with pytest.raises(RecordingStoreError):
        await store.put(new_key(), WAV)
