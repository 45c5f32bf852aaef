"""Time and wire formats: aware UTC datetimes inside, ISO 8601 with milliseconds and Z outside."""

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    stamp = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.")
    return stamp + f"{value.microsecond // 1000:03d}Z"
