"""Text messages through a provider: the interface and its `sandbox` default.

integrations/telephony has no SMS yet; this is the minimal seam campaigns and conversations use
until it does (`send_sms` belongs on the telephony provider). The sandbox needs no network: it
accepts every number except those whose last four digits are 0199 (CONTRACT section 3's failing
sandbox numbers), and returns a provider id derived from our message id, so a repeat of the same
message is recognisable as one.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Protocol

from tenancy.settings import get_settings


class SmsError(Exception):
    """The provider refused or could not be reached; the message is safe to show."""


class SmsProvider(Protocol):
    name: str

    async def send_sms(self, to: str, body: str, message_id: str,
                       from_number: str | None = None) -> str:
        """Send `body` to `to`; return the provider's id of the message."""
        ...


class SandboxSms:
    name = "sandbox"

    async def send_sms(self, to: str, body: str, message_id: str,
                       from_number: str | None = None) -> str:
        if to.endswith("0199"):
            raise SmsError("the sandbox carrier rejected the destination number")
        return "SM" + hashlib.sha256(message_id.encode()).hexdigest()[:32]


@lru_cache
def sms_provider(name: str | None = None) -> SmsProvider:
    chosen = name or get_settings().telephony
    if chosen == "sandbox":
        return SandboxSms()
    raise SmsError(f"SMS is not available with the {chosen!r} telephony provider")
