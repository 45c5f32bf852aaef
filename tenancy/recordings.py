"""The recordings store SWITCHBOARD_RECORDINGS names, made once per configuration."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from integrations.recordings import (
    FileRecordingStore,
    RecordingStore,
    S3Config,
    S3RecordingStore,
)
from tenancy.settings import Settings, get_settings


class RecordingsMisconfigured(ValueError):
    """SWITCHBOARD_RECORDINGS asks for a store its other settings do not describe."""


def recording_store(settings: Settings | None = None) -> RecordingStore:
    settings = settings or get_settings()
    if settings.recordings == "s3":
        if not settings.recordings_s3_bucket:
            raise RecordingsMisconfigured(
                "SWITCHBOARD_RECORDINGS=s3 needs SWITCHBOARD_RECORDINGS_S3_BUCKET"
            )
        return _s3_store(
            S3Config(
                settings.recordings_s3_bucket,
                settings.recordings_s3_endpoint_url,
                settings.recordings_s3_region,
            )
        )
    return _file_store(Path(settings.data_dir).resolve() / "recordings")


@lru_cache(maxsize=8)
def _file_store(root: Path) -> FileRecordingStore:
    return FileRecordingStore(root)


# One boto3 client per bucket configuration for the process (making one costs milliseconds).
@lru_cache(maxsize=8)
def _s3_store(config: S3Config) -> S3RecordingStore:
    return S3RecordingStore(config)
