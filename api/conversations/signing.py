"""Signatures of the sandbox carrier's webhooks (SMS and calls), as a real carrier signs its
callbacks.

`X-Sandbox-Signature: v1=<hex HMAC-SHA256(secret, "<sub_account_id>." + raw body)>`; the secret
is the UTF-8 of SWITCHBOARD_SANDBOX_WEBHOOK_SECRET, or when that is unset one derived from
SWITCHBOARD_KEY_PEPPER (signatures under SWITCHBOARD_KEY_PEPPER_PREVIOUS are accepted too).
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from api.errors import validation_details
from tenancy.errors import APIError
from tenancy.keys import peppers
from tenancy.settings import get_settings

HEADER = "X-Sandbox-Signature"
Model = TypeVar("Model", bound=BaseModel)


def _secret(pepper: str | None) -> bytes:
    configured = get_settings().sandbox_webhook_secret
    if pepper is None and configured:
        return configured.encode()
    derived_from = pepper or get_settings().key_pepper
    return hmac.new(derived_from.encode(), b"switchboard-sandbox-sms-v1", hashlib.sha256).digest()


def sign(sub_account_id: uuid.UUID | str, body: bytes, pepper: str | None = None) -> str:
    """The signature under the configured secret, or under the one `pepper` derives."""
    digest = hmac.new(_secret(pepper), f"{sub_account_id}.".encode() + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def verify(sub_account_id: str, body: bytes, signature: str | None) -> bool:
    if signature is None:
        return False
    if get_settings().sandbox_webhook_secret:
        return hmac.compare_digest(sign(sub_account_id, body), signature)
    return any(
        hmac.compare_digest(sign(sub_account_id, body, pepper), signature) for pepper in peppers()
    )


def signed_body(
    model_class: type[Model], sub_account_id: uuid.UUID, body: bytes, signature: str | None
) -> Model:
    """The webhook's JSON body as `model_class` once its signature checks out: 401
    `invalid_signature` first, then 400 `validation_error`."""
    if not verify(str(sub_account_id), body, signature):
        raise APIError(401, "invalid_signature", "the provider signature is missing or wrong")
    try:
        return model_class.model_validate_json(body)
    except ValidationError as exc:
        raise APIError(
            400, "validation_error", "invalid request", details=validation_details(exc)
        ) from None
