"""Signed tracking tokens: which recipient opened, clicked or unsubscribed, unforgeable.

A token is `base64url(payload) "." base64url(HMAC-SHA256(secret, payload)[:16])`, where the
payload is a kind byte, the sub-account id and the campaign recipient id (and, for a click, the
target URL). The secret is derived from SWITCHBOARD_KEY_PEPPER, so no new setting is needed;
links signed under SWITCHBOARD_KEY_PEPPER_PREVIOUS keep working after a change of pepper.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from dataclasses import dataclass
from functools import lru_cache

from tenancy.keys import peppers
from tenancy.settings import get_settings

KINDS = {"open": b"o", "click": b"c", "unsubscribe": b"u"}
MAC_BYTES = 16
MAX_TOKEN = 4096


@dataclass(frozen=True)
class Tracked:
    kind: str
    sub_account_id: uuid.UUID
    recipient_id: uuid.UUID
    url: str | None = None


@lru_cache
def _secret(pepper: str) -> bytes:
    return hmac.new(pepper.encode(), b"switchboard-tracking-v1", hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """The bytes of unpadded base64url `text` written as `_b64` writes them; any other spelling
    (padding, characters outside the alphabet, non-zero spare bits) is refused (ValueError), so
    one token has one spelling."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical spelling")
    return data


def _mac(payload: bytes, pepper: str | None = None) -> bytes:
    secret = _secret(pepper or get_settings().key_pepper)
    return hmac.new(secret, payload, hashlib.sha256).digest()[:MAC_BYTES]


def sign(
    kind: str, sub_account_id: uuid.UUID, recipient_id: uuid.UUID, url: str | None = None
) -> str:
    payload = KINDS[kind] + sub_account_id.bytes + recipient_id.bytes + (url or "").encode()
    return f"{_b64(payload)}.{_b64(_mac(payload))}"


def verify(kind: str, token: str) -> Tracked | None:
    """The token's contents when it is a genuine token of `kind`; None otherwise."""
    if len(token) > MAX_TOKEN or token.count(".") != 1:
        return None
    body, _, mac = token.partition(".")
    try:
        payload, given = _unb64(body), _unb64(mac)
    except (ValueError, TypeError):
        return None
    if len(payload) < 33 or not any(
        hmac.compare_digest(given, _mac(payload, pepper)) for pepper in peppers()
    ):
        return None
    if payload[:1] != KINDS[kind]:
        return None
    try:
        url = payload[33:].decode() or None
    except UnicodeDecodeError:
        return None
    return Tracked(kind, uuid.UUID(bytes=payload[1:17]), uuid.UUID(bytes=payload[17:33]), url)
