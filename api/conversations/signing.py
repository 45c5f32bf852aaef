"""Signatures of the sandbox SMS provider's webhooks, as a real carrier signs its callbacks.

`X-Sandbox-Signature: v1=<hex HMAC-SHA256(secret, "<sub_account_id>." + raw body)>`, with a
secret derived from SWITCHBOARD_KEY_PEPPER (signatures under SWITCHBOARD_KEY_PEPPER_PREVIOUS are
accepted too).
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

from tenancy.keys import peppers
from tenancy.settings import get_settings

HEADER = "X-Sandbox-Signature"


def _secret(pepper: str) -> bytes:
    return hmac.new(pepper.encode(), b"switchboard-sandbox-sms-v1", hashlib.sha256).digest()


def sign(sub_account_id: uuid.UUID | str, body: bytes, pepper: str | None = None) -> str:
    secret = _secret(pepper or get_settings().key_pepper)
    digest = hmac.new(secret, f"{sub_account_id}.".encode() + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def verify(sub_account_id: str, body: bytes, signature: str | None) -> bool:
    return signature is not None and any(
        hmac.compare_digest(sign(sub_account_id, body, pepper), signature)
        for pepper in peppers())
