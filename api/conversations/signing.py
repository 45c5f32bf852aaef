"""Signatures of the sandbox SMS provider's webhooks, as a real carrier signs its callbacks.

`X-Sandbox-Signature: v1=<hex HMAC-SHA256(secret, "<sub_account_id>." + raw body)>`, with a
secret derived from SWITCHBOARD_KEY_PEPPER.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

from tenancy.settings import get_settings

HEADER = "X-Sandbox-Signature"


def _secret() -> bytes:
    return hmac.new(get_settings().key_pepper.encode(), b"switchboard-sandbox-sms-v1",
                    hashlib.sha256).digest()


def sign(sub_account_id: uuid.UUID | str, body: bytes) -> str:
    digest = hmac.new(_secret(), f"{sub_account_id}.".encode() + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def verify(sub_account_id: str, body: bytes, signature: str | None) -> bool:
    return signature is not None and hmac.compare_digest(sign(sub_account_id, body), signature)
