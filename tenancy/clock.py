"""Time and wire formats: aware UTC datetimes inside, ISO 8601 with milliseconds and Z outside."""

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # "2026-11-23T04:05:06.789+00:00" -> "2026-11-23T04:05:06.789Z" (milliseconds truncated)
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"
