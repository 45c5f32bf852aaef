"""Signed recording links: the URL's shape, seven days of validity, and every way a link
that is not ours (tampered, expired, another call's or sub-account's) fails to verify."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

from tenancy.recording_links import LinkCheck, recording_url, verify
from tenancy.settings import Settings

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
SETTINGS = Settings(
    SWITCHBOARD_KEY_PEPPER="pepper-now", SWITCHBOARD_PUBLIC_URL="https://sb.example"
)


def query_of(url: str) -> tuple[str, str]:
    query = parse_qs(urlsplit(url).query)
    return query["expires"][0], query["signature"][0]


def check(
    url: str,
    sub_account_id: uuid.UUID,
    call_id: uuid.UUID,
    now: datetime = NOW,
    settings: Settings = SETTINGS,
) -> LinkCheck:
    expires, signature = query_of(url)
    return verify(sub_account_id, call_id, expires, signature, now=now, settings=settings)


def test_link_names_the_call_and_expires_in_seven_days() -> None:
    sub_account_id, call_id = uuid.uuid4(), uuid.uuid4()

    url = recording_url(SETTINGS, sub_account_id, call_id, now=NOW)

    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == "https://sb.example"
    assert parts.path == f"/recordings/{sub_account_id}/{call_id}.wav"
    expires, signature = query_of(url)
    assert int(expires) == int((NOW + timedelta(days=7)).timestamp())
    assert len(signature) == 64 and int(signature, 16) >= 0


def test_link_verifies_until_it_expires() -> None:
    sub_account_id, call_id = uuid.uuid4(), uuid.uuid4()
    url = recording_url(SETTINGS, sub_account_id, call_id, now=NOW)

    assert check(url, sub_account_id, call_id) is LinkCheck.VALID
    assert (
        check(url, sub_account_id, call_id, now=NOW + timedelta(days=7, seconds=-1))
        is LinkCheck.VALID
    )
    assert check(url, sub_account_id, call_id, now=NOW + timedelta(days=7)) is LinkCheck.EXPIRED


def test_tampered_signature_or_expiry_does_not_verify() -> None:
    sub_account_id, call_id = uuid.uuid4(), uuid.uuid4()
    expires, signature = query_of(recording_url(SETTINGS, sub_account_id, call_id, now=NOW))
    flipped = ("0" if signature[0] != "0" else "1") + signature[1:]
    later = str(int(expires) + 86400)

    for given_expires, given_signature in [
        (expires, flipped),
        (later, signature),
        (expires, signature[:-1]),
        (expires, ""),
        (None, signature),
        (expires, None),
        (f"{expires}.0", signature),
        ("-" + expires, signature),
    ]:
        assert (
            verify(
                sub_account_id, call_id, given_expires, given_signature, now=NOW, settings=SETTINGS
            )
            is LinkCheck.INVALID
        )


def test_link_of_one_call_does_not_open_another_calls_or_sub_accounts_recording() -> None:
    sub_account_id, call_id = uuid.uuid4(), uuid.uuid4()
    url = recording_url(SETTINGS, sub_account_id, call_id, now=NOW)

    assert check(url, sub_account_id, uuid.uuid4()) is LinkCheck.INVALID
    assert check(url, uuid.uuid4(), call_id) is LinkCheck.INVALID
    assert check(url, call_id, sub_account_id) is LinkCheck.INVALID


def test_link_signed_under_the_previous_pepper_verifies_while_rotating() -> None:
    sub_account_id, call_id = uuid.uuid4(), uuid.uuid4()
    old = Settings(SWITCHBOARD_KEY_PEPPER="pepper-before")
    url = recording_url(old, sub_account_id, call_id, now=NOW)
    rotating = Settings(
        SWITCHBOARD_KEY_PEPPER="pepper-now", SWITCHBOARD_KEY_PEPPER_PREVIOUS="pepper-before"
    )

    assert check(url, sub_account_id, call_id, settings=rotating) is LinkCheck.VALID
    assert check(url, sub_account_id, call_id, settings=SETTINGS) is LinkCheck.INVALID
    # New links use the new pepper only.
    fresh = recording_url(rotating, sub_account_id, call_id, now=NOW)
    assert check(fresh, sub_account_id, call_id, settings=SETTINGS) is LinkCheck.VALID
