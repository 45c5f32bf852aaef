"""A tracking token has one spelling: padding, stray characters or other spare bits are refused."""

from __future__ import annotations

import uuid

import pytest

from api.tracking import tokens


def genuine() -> str:
    return tokens.sign("click", uuid.uuid4(), uuid.uuid4(), "https://example.com/offer")


def test_the_spelling_sign_writes_verifies() -> None:
    token = genuine()
    tracked = tokens.verify("click", token)
    assert tracked is not None and tracked.url == "https://example.com/offer"


def _spare_bits(part: str) -> str:
    # The last character of unpadded base64 of a length that is not a multiple of 3 carries
    # spare bits; flipping the lowest one decodes to the same bytes.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(part[-1])
    return part[:-1] + alphabet[last ^ 1]


@pytest.mark.parametrize(
    "respell",
    [
        pytest.param(lambda body, mac: f"{body}==.{mac}", id="padded-payload"),
        pytest.param(lambda body, mac: f"{body}.{mac}=", id="padded-mac"),
        pytest.param(lambda body, mac: f"{body[:4]}!{body[4:]}.{mac}", id="stray-character"),
        pytest.param(lambda body, mac: f"{body}.{_spare_bits(mac)}", id="spare-bits"),
    ],
)
def test_another_spelling_of_a_genuine_token_is_refused(respell) -> None:  # type: ignore[no-untyped-def]
    body, _, mac = genuine().partition(".")
    assert len(mac) % 4 != 0  # 16 MAC bytes: 22 characters, the last with spare bits
    assert tokens.verify("click", respell(body, mac)) is None
