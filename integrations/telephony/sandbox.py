"""The `sandbox` telephony provider: no network, deterministic, for development and tests.

- Purchased numbers are +1 NPA 555 01XX (fictional numbers), never 0199.
- Purchase and import always succeed. A number whose last four digits are 0199 fails assign and
  release, so the 502 paths can be exercised.
- A call rings for `ring_seconds`, is answered, and completes `call_seconds` after it started,
  with a transcript, a duration and (when recording) a recording URL. The provider keeps no
  state: the call id carries when it started, so any worker process can answer for it.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from datetime import UTC, datetime

import phonenumbers

from integrations.telephony import (
    CallState,
    HeldNumber,
    NoNumbersAvailable,
    OutboundCall,
    ProviderNumber,
    TelephonyError,
)

FAILING_SUFFIX = "0199"
DEFAULT_AREA_CODES = ("201", "212", "305", "312", "404", "415", "503", "512", "617", "702", "718",
                      "804", "917")
RECORDINGS_BASE = "https://recordings.sandbox.switchboard.invalid"


def fails(phone_number: str) -> bool:
    return phone_number.endswith(FAILING_SUFFIX)


def _valid(number: str) -> bool:
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(number))
    except phonenumbers.NumberParseException:
        return False


class SandboxTelephony:
    name = "sandbox"

    def __init__(self, ring_seconds: float = 1.0, call_seconds: float = 3.0) -> None:
        self.ring_seconds = ring_seconds
        self.call_seconds = max(call_seconds, ring_seconds)

    @classmethod
    def from_env(cls) -> SandboxTelephony:
        return cls(float(os.environ.get("SWITCHBOARD_SANDBOX_RING_SECONDS", "1")),
                   float(os.environ.get("SWITCHBOARD_SANDBOX_CALL_SECONDS", "3")))

    async def purchase_number(self, area_code: str | None,
                              exclude: frozenset[str]) -> ProviderNumber:
        area_codes = [area_code] if area_code else random.sample(DEFAULT_AREA_CODES,
                                                                 len(DEFAULT_AREA_CODES))
        for npa in area_codes:
            if not _valid(f"+1{npa}5550100"):
                continue
            free = [f"+1{npa}55501{xx:02d}" for xx in range(99)]
            free = [number for number in free if number not in exclude]
            if free:
                number = random.choice(free)
                return ProviderNumber(number, f"sandbox-number-{number[1:]}")
        raise NoNumbersAvailable(f"no sandbox numbers available in area code {area_code}"
                                 if area_code else "no sandbox numbers available")

    async def import_number(self, phone_number: str) -> ProviderNumber:
        return ProviderNumber(phone_number, f"sandbox-import-{phone_number[1:]}")

    async def assign_number(self, number: HeldNumber, agent_id: str) -> str:
        if fails(number.phone_number):
            raise TelephonyError("sandbox: provisioning the dispatch rule failed")
        return f"sandbox-dispatch-{number.phone_number[1:]}-{agent_id}"

    async def unassign_number(self, number: HeldNumber) -> bool:
        if fails(number.phone_number):
            raise TelephonyError("sandbox: removing the dispatch rule failed")
        return number.dispatch_rule_id is not None

    async def release_number(self, number: HeldNumber) -> bool:
        if fails(number.phone_number):
            raise TelephonyError("sandbox: the carrier refused to release the number")
        return number.dispatch_rule_id is not None

    async def place_call(self, call: OutboundCall) -> str:
        started_ms = int(time.time() * 1000)
        return f"sbx_{started_ms}_{int(call.record)}_{call.call_id}"

    async def call_state(self, provider_call_id: str) -> CallState:
        try:
            _, started_ms, record, call_id = provider_call_id.split("_", 3)
            started = int(started_ms) / 1000
        except ValueError:
            raise TelephonyError("sandbox: unknown call id") from None
        elapsed = time.time() - started
        started_at = datetime.fromtimestamp(started, UTC)
        if elapsed < self.ring_seconds:
            return CallState("ringing", started_at=started_at)
        if elapsed < self.call_seconds:
            return CallState("in_progress", started_at=started_at)
        ended = started + self.call_seconds
        return CallState(
            "completed",
            started_at=started_at,
            ended_at=datetime.fromtimestamp(ended, UTC),
            duration_seconds=max(1, round(self.call_seconds - self.ring_seconds)),
            transcript=("Agent: Hello, this is your AI assistant calling. Is now a good time?\n"
                        "Contact: Yes, go ahead.\n"
                        "Agent: Thank you. I have noted your answers. Goodbye!"),
            recording_url=f"{RECORDINGS_BASE}/{call_id}.mp3" if record == "1" else None,
        )

    async def send_sms(self, from_number: str | None, to_number: str, body: str,
                       message_id: str) -> str:
        if fails(to_number):
            raise TelephonyError("sandbox: the carrier rejected the destination number")
        # Derived from our id: a repeat of one message is recognisable as such.
        return "SM" + hashlib.sha256(message_id.encode()).hexdigest()[:32]

    async def aclose(self) -> None:
        return None
