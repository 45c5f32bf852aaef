"""Call recordings kept as whole WAV files: on the local disk or in an S3-compatible bucket.

Both stores hold one object per call under the key `<sub_account_id>/<call_id>.wav`, so a
tenant's recordings are one folder (one key prefix) and go together when it is purged. Keys are
made only by `recording_key` and checked by `parse_key` before any file or object is touched,
so no key can reach outside its tenant's folder. Stores raise `RecordingStoreError` for every
failure; callers never see OSError or botocore exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

CONTENT_TYPE = "audio/wav"
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
KEY = re.compile(rf"^({_UUID})/({_UUID})\.wav$")
# S3's DeleteObjects takes at most this many keys per request.
DELETE_BATCH = 1000


class RecordingStoreError(Exception):
    """The store could not be read or written; the message is safe to log."""


def recording_key(sub_account_id: uuid.UUID, call_id: uuid.UUID) -> str:
    return f"{sub_account_id}/{call_id}.wav"


def parse_key(key: str) -> tuple[uuid.UUID, uuid.UUID]:
    """(sub_account_id, call_id) of a key `recording_key` made; ValueError for anything else."""
    match = KEY.fullmatch(key)
    if match is None:
        raise ValueError(f"not a recording key: {key!r}")
    return uuid.UUID(match.group(1)), uuid.UUID(match.group(2))


def _tenant_prefix(sub_account_id: uuid.UUID) -> str:
    return f"{uuid.UUID(str(sub_account_id))}/"


class RecordingStore(Protocol):
    async def put(self, key: str, data: bytes) -> None:
        """Keep `data` under `key`, replacing what was there; complete or not at all."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The bytes under `key`; None when there are none."""
        ...

    async def keys(self, sub_account_id: uuid.UUID) -> list[str]:
        """Every recording key of the sub-account, sorted."""
        ...

    async def delete_tenant(self, sub_account_id: uuid.UUID) -> None:
        """Remove every recording of the sub-account (nothing to remove is no error)."""
        ...


# --- files ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileRecordingStore:
    """`<root>/<sub_account_id>/<call_id>.wav`, written to a temporary file and renamed."""

    root: Path

    def _path(self, key: str) -> Path:
        sub_account_id, call_id = parse_key(key)
        return self.root / str(sub_account_id) / f"{call_id}.wav"

    async def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            await asyncio.to_thread(_write_atomically, path, data)
        except OSError as exc:
            raise RecordingStoreError(f"cannot write recording {key}: {exc.strerror}") from None

    async def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RecordingStoreError(f"cannot read recording {key}: {exc.strerror}") from None

    async def keys(self, sub_account_id: uuid.UUID) -> list[str]:
        folder = self.root / _tenant_prefix(sub_account_id)
        try:
            names = await asyncio.to_thread(os.listdir, folder)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise RecordingStoreError(f"cannot list recordings: {exc.strerror}") from None
        found = (f"{_tenant_prefix(sub_account_id)}{name}" for name in names)
        return sorted(key for key in found if KEY.fullmatch(key))

    async def delete_tenant(self, sub_account_id: uuid.UUID) -> None:
        folder = self.root / _tenant_prefix(sub_account_id)
        try:
            await asyncio.to_thread(shutil.rmtree, folder)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise RecordingStoreError(f"cannot delete recordings: {exc.strerror}") from None


def _write_atomically(path: Path, data: bytes) -> None:
    """A reader sees the old file or the whole new one, never a part (a crash leaves at most
    a dot-file beside it, which `keys` ignores)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}.partial")
    fd = os.open(
        partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)


# --- S3 ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class S3Config:
    bucket: str
    endpoint_url: str | None = None
    region: str | None = None


class S3RecordingStore:
    """One object per recording in an S3-compatible bucket, through boto3 in a thread (its
    client is thread-safe); credentials come from the standard AWS environment variables."""

    def __init__(self, config: S3Config) -> None:
        self.config = config
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.session.Session().client(
                "s3",
                endpoint_url=self.config.endpoint_url,
                region_name=self.config.region,
                config=Config(
                    retries={"max_attempts": 3, "mode": "standard"},
                    connect_timeout=5,
                    read_timeout=30,
                ),
            )
        return self._client

    async def put(self, key: str, data: bytes) -> None:
        parse_key(key)
        with self._failures(f"cannot write recording {key}"):
            await asyncio.to_thread(
                self.client.put_object,
                Bucket=self.config.bucket,
                Key=key,
                Body=data,
                ContentType=CONTENT_TYPE,
            )

    async def get(self, key: str) -> bytes | None:
        parse_key(key)
        with self._failures(f"cannot read recording {key}"):
            return await asyncio.to_thread(self._get, key)

    def _get(self, key: str) -> bytes | None:
        try:
            answer = self.client.get_object(Bucket=self.config.bucket, Key=key)
        except self.client.exceptions.NoSuchKey:
            return None
        body: bytes = answer["Body"].read()
        return body

    async def keys(self, sub_account_id: uuid.UUID) -> list[str]:
        with self._failures("cannot list recordings"):
            found = await asyncio.to_thread(lambda: list(self._list(sub_account_id)))
        return sorted(key for key in found if KEY.fullmatch(key))

    def _list(self, sub_account_id: uuid.UUID) -> Iterator[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.config.bucket, Prefix=_tenant_prefix(sub_account_id)
        )
        for page in pages:
            for item in page.get("Contents", ()):
                yield item["Key"]

    async def delete_tenant(self, sub_account_id: uuid.UUID) -> None:
        with self._failures("cannot delete recordings"):
            await asyncio.to_thread(self._delete_tenant, sub_account_id)

    def _delete_tenant(self, sub_account_id: uuid.UUID) -> None:
        keys = list(self._list(sub_account_id))
        for start in range(0, len(keys), DELETE_BATCH):
            batch = [{"Key": key} for key in keys[start : start + DELETE_BATCH]]
            answer = self.client.delete_objects(
                Bucket=self.config.bucket, Delete={"Objects": batch, "Quiet": True}
            )
            if answer.get("Errors"):
                first = answer["Errors"][0]
                raise RecordingStoreError(
                    f"cannot delete recording {first.get('Key')}: {first.get('Code')}"
                )

    @contextlib.contextmanager
    def _failures(self, what: str) -> Iterator[None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            raise RecordingStoreError(f"{what}: S3 answered {code}") from None
        except BotoCoreError as exc:
            raise RecordingStoreError(f"{what}: {type(exc).__name__}") from None


__all__ = [
    "CONTENT_TYPE",
    "FileRecordingStore",
    "RecordingStore",
    "RecordingStoreError",
    "S3Config",
    "S3RecordingStore",
    "parse_key",
    "recording_key",
]
