"""Signed, expiring links to call recordings, served without an API key.

A link is `<SWITCHBOARD_PUBLIC_URL>/recordings/<sub_account_id>/<call_id>.wav?expires=<unix
seconds>&signature=<hex HMAC-SHA256(secret, "<sub_account_id>/<call_id>.wav:<expires>")>`,
valid LINK_TTL. The secret is derived from SWITCHBOARD_KEY_PEPPER (no new setting); links
signed under SWITCHBOARD_KEY_PEPPER_PREVIOUS keep working until they expire.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from datetime import datetime, timedelta
from enum import Enum
from functools import lru_cache
from urllib.parse import urlencode

from integrations.recordings import recording_key
from tenancy.clock import utcnow
from tenancy.keys import peppers
from tenancy.settings import Settings, get_settings

LINK_TTL = timedelta(days=7)
PATH_PREFIX = "/recordings"
# Unix seconds, at most 12 digits (year 33658): anything longer is not ours.
EXPIRES = re.compile(r"^[0-9]{1,12}$")
SIGNATURE = re.compile(r"^[0-9a-f]{64}$")


class LinkCheck(Enum):
    VALID = "valid"
    INVALID = "invalid"
    EXPIRED = "expired"


@lru_cache
def _secret(pepper: str) -> bytes:
    return hmac.new(pepper.encode(), b"switchboard-recording-links-v1", hashlib.sha256).digest()


def _signature(pepper: str, sub_account_id: uuid.UUID, call_id: uuid.UUID, expires: int) -> str:
    message = f"{recording_key(sub_account_id, call_id)}:{expires}".encode()
    return hmac.new(_secret(pepper), message, hashlib.sha256).hexdigest()


def recording_path(sub_account_id: uuid.UUID, call_id: uuid.UUID) -> str:
    return f"{PATH_PREFIX}/{recording_key(sub_account_id, call_id)}"


def recording_url(
    settings: Settings | None,
    sub_account_id: uuid.UUID,
    call_id: uuid.UUID,
    now: datetime | None = None,
) -> str:
    """A link to the call's recording, valid LINK_TTL from `now`."""
    settings = settings or get_settings()
    expires = int((now or utcnow()).timestamp() + LINK_TTL.total_seconds())
    signature = _signature(settings.key_pepper, sub_account_id, call_id, expires)
    query = urlencode({"expires": expires, "signature": signature})
    return f"{settings.public_url.rstrip('/')}{recording_path(sub_account_id, call_id)}?{query}"


def verify(
    sub_account_id: uuid.UUID,
    call_id: uuid.UUID,
    expires: str | None,
    signature: str | None,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> LinkCheck:
    """Whether a link's query signs this call's recording, and is still in time."""
    if (
        expires is None
        or signature is None
        or not EXPIRES.fullmatch(expires)
        or not SIGNATURE.fullmatch(signature)
    ):
        return LinkCheck.INVALID
    genuine = any(
        hmac.compare_digest(signature, _signature(pepper, sub_account_id, call_id, int(expires)))
        for pepper in peppers(settings or get_settings())
    )
    if not genuine:
        return LinkCheck.INVALID
    if int(expires) <= (now or utcnow()).timestamp():
        return LinkCheck.EXPIRED
    return LinkCheck.VALID
