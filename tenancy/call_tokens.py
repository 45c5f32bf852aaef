"""The token a call's media stream carries (CONTRACT 6): HMAC-SHA256 under the key pepper of
"<sub_account_id>.<call_id>", so only a call we placed reaches the voice runtime's agent."""

from __future__ import annotations

import hashlib
import hmac
import uuid

from tenancy.settings import Settings


def call_token(pepper: str, sub_account_id: uuid.UUID | str, call_id: uuid.UUID | str) -> str:
    message = f"{sub_account_id}.{call_id}".encode()
    return hmac.new(pepper.encode(), message, hashlib.sha256).hexdigest()


def token_valid(settings: Settings, sub_account_id: str, call_id: str, token: str) -> bool:
    """Made under the pepper, or the previous one while a deployment moves off it."""
    peppers = [settings.key_pepper, settings.key_pepper_previous]
    return any(
        hmac.compare_digest(call_token(pepper, sub_account_id, call_id), token)
        for pepper in peppers
        if pepper
    )


def stream_parameters(
    settings: Settings, sub_account_id: uuid.UUID, call_id: uuid.UUID
) -> dict[str, str]:
    return {
        "call_id": str(call_id),
        "sub_account_id": str(sub_account_id),
        "token": call_token(settings.key_pepper, sub_account_id, call_id),
    }
