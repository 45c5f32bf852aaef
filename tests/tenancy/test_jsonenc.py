"""The one JSON encoder: UUIDs and times one way everywhere, Decimal by the caller's rule."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from decimal import Decimal

from tenancy import jsonenc


def test_uuids_and_times_are_written_as_the_api_writes_them() -> None:
    value = {
        "id": uuid.UUID(int=1),
        "at": datetime(2026, 11, 24, 6, 5, 4, 321987, tzinfo=UTC),
        "on": date(2026, 11, 24),
    }

    written = jsonenc.dumps(value)

    assert written == (
        '{"id":"00000000-0000-0000-0000-000000000001",'
        '"at":"2026-11-24T06:05:04.321Z","on":"2026-11-24"}'
    )


def test_bodies_write_every_decimal_as_a_float() -> None:
    assert jsonenc.dumps([Decimal("10.00"), Decimal("0.10")]) == "[10.0,0.1]"


def test_columns_write_a_whole_decimal_as_an_int() -> None:
    written = jsonenc.dumps([Decimal("10.00"), Decimal("0.10")], whole_decimal_as_int=True)

    assert written == "[10,0.1]"


def test_what_orjson_refuses_is_written_by_the_standard_library() -> None:
    written = jsonenc.dumps({"n": 2**70, "s": "\ud800"})

    assert written == '{"n":1180591620717411303424,"s":"\\ud800"}'
