"""The `sandbox` telephony provider: no network, deterministic, for development and tests.

- Purchased numbers are +1 NPA 555 01XX (fictional numbers), never 0198 or 0199.
- Purchase and import always succeed. A number whose last four digits are 0199 fails assign and
  release, and one ending 0198 assigns fine and fails unassign (CONTRACT 9), so the 502 paths
  can be exercised.
- A call is a real conversation with the voice runtime (CONTRACT 6): the sandbox dials
  `SWITCHBOARD_VOICE_URL` over Media Streams and plays the contact of the callee's script
  (sandbox_media.py) in a task of this process; the runtime records the outcome. A callee whose
  number ends 0186 rings for `ring_seconds` and ends `no_answer`; 0187 is `busy`. The call id
  carries when it started and the script, so any worker process can answer for it.
- An inbound call (`POST /webhooks/providers/sandbox/calls/{sub_account_id}`) is connected the
  same way, the caller playing the script of its own number.
- A transfer of a live call (the agent's transfer_call tool) succeeds, except to a number ending
  0187, which is busy.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import random
import time
import uuid
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
from integrations.telephony.sandbox_media import (
    NEVER_CONNECTS,
    ContactResult,
    ContactSession,
    answered_by_for,
    run_contact,
    script_for,
    stream_url,
)

log = logging.getLogger("switchboard.telephony.sandbox")
# The contacts on the line in this process (a reference keeps each task alive).
_CONTACTS: set[asyncio.Task[None]] = set()
# How calls whose line closed ended, as this process saw them: the fallback the worker records
# when the runtime never reached it, or left the call without writing its end (CONTRACT 6).
_LINE_CLOSED: dict[str, tuple[float, CallState]] = {}
# What each contact lived on the line (what it said, heard, and when the runtime cleared its
# audio), by provider call id: the sandbox's call log, kept as long as the fallback above.
_LINE_LOG: dict[str, tuple[float, ContactResult]] = {}
LINE_CLOSED_KEEP_SECONDS = 3600

FAILING_SUFFIX = "0199"
UNASSIGN_FAILING_SUFFIX = "0198"
BUSY_SUFFIX = "0187"
# 00..97: the failing numbers above are never sold.
SOLD_SUFFIXES = range(98)
DEFAULT_AREA_CODES = (
    "201",
    "212",
    "305",
    "312",
    "404",
    "415",
    "503",
    "512",
    "617",
    "702",
    "718",
    "804",
    "917",
)


def fails(phone_number: str) -> bool:
    return phone_number.endswith(FAILING_SUFFIX)


def _valid(number: str) -> bool:
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(number))
    except phonenumbers.NumberParseException:
        return False


class SandboxTelephony:
    name = "sandbox"

    def __init__(self, ring_seconds: float = 1.0, voice_url: str = "ws://127.0.0.1:8100") -> None:
        self.ring_seconds = ring_seconds
        self.voice_url = voice_url

    @classmethod
    def from_env(cls) -> SandboxTelephony:
        return cls(
            float(os.environ.get("SWITCHBOARD_SANDBOX_RING_SECONDS", "1")),
            os.environ.get("SWITCHBOARD_VOICE_URL", "ws://127.0.0.1:8100"),
        )

    async def purchase_number(
        self, area_code: str | None, exclude: frozenset[str]
    ) -> ProviderNumber:
        area_codes = (
            [area_code] if area_code else random.sample(DEFAULT_AREA_CODES, len(DEFAULT_AREA_CODES))
        )
        for npa in area_codes:
            if not _valid(f"+1{npa}5550100"):
                continue
            free = [f"+1{npa}55501{xx:02d}" for xx in SOLD_SUFFIXES]
            free = [number for number in free if number not in exclude]
            if free:
                number = random.choice(free)
                return ProviderNumber(number, f"sandbox-number-{number[1:]}")
        raise NoNumbersAvailable(
            f"no sandbox numbers available in area code {area_code}"
            if area_code
            else "no sandbox numbers available"
        )

    async def import_number(self, phone_number: str) -> ProviderNumber:
        return ProviderNumber(phone_number, f"sandbox-import-{phone_number[1:]}")

    async def assign_number(self, number: HeldNumber, agent_id: str) -> str:
        if fails(number.phone_number):
            raise TelephonyError("sandbox: provisioning the dispatch rule failed")
        return f"sandbox-dispatch-{number.phone_number[1:]}-{agent_id}"

    async def unassign_number(self, number: HeldNumber) -> bool:
        if fails(number.phone_number) or number.phone_number.endswith(UNASSIGN_FAILING_SUFFIX):
            raise TelephonyError("sandbox: removing the dispatch rule failed")
        return number.dispatch_rule_id is not None

    async def release_number(self, number: HeldNumber) -> bool:
        if fails(number.phone_number):
            raise TelephonyError("sandbox: the carrier refused to release the number")
        return number.dispatch_rule_id is not None

    async def place_call(self, call: OutboundCall) -> str:
        started_ms = int(time.time() * 1000)
        # An inbound call's contact is its caller, who rang our number (CONTRACT 6).
        script = script_for(call.from_number if call.direction == "inbound" else call.to_number)
        provider_call_id = f"sbx_{started_ms}_{script}_{call.call_id}"
        if script not in NEVER_CONNECTS:
            session = ContactSession(
                call_sid=f"CA{call.call_id.replace('-', '')}",
                account_sid="ACsandbox",
                stream_sid=f"MZ{uuid.uuid4().hex}",
                script=script,
                custom_parameters={
                    **call.stream_parameters,
                    "answered_by": answered_by_for(script),
                },
                max_seconds=call.max_duration_seconds + 30,
            )
            task = asyncio.create_task(self._contact(session, provider_call_id))
            _CONTACTS.add(task)
            task.add_done_callback(_CONTACTS.discard)
        return provider_call_id

    async def _contact(self, session: ContactSession, provider_call_id: str) -> None:
        try:
            lived = await run_contact(stream_url(self.voice_url), session)
            _LINE_LOG[provider_call_id] = (time.time(), lived)
            error = "voice_unavailable: the voice runtime left the call without its record"
        except TelephonyError as exc:  # the runtime is down: the call fails at once
            log.warning(
                "sandbox contact of %s could not reach the runtime: %s", session.call_sid, exc
            )
            error = f"voice_unavailable: {exc}"
        now = time.time()
        for kept in (_LINE_CLOSED, _LINE_LOG):
            for key in [k for k, (at, _) in kept.items() if now - at > LINE_CLOSED_KEEP_SECONDS]:
                del kept[key]
        _LINE_CLOSED[provider_call_id] = (
            now,
            CallState(
                "failed",
                ended_at=datetime.fromtimestamp(now, UTC),
                ended_reason="failed",
                error=error,
            ),
        )

    @staticmethod
    def line_log(provider_call_id: str) -> ContactResult | None:
        """What the contact of a call this process placed lived on the line, once it closed."""
        kept = _LINE_LOG.get(provider_call_id)
        return kept[1] if kept else None

    async def call_state(self, provider_call_id: str) -> CallState:
        try:
            _, started_ms, rest = provider_call_id.split("_", 2)
            script = rest.rsplit("_", 1)[0]  # a script's name may hold "_"; a call id does not
            started = int(started_ms) / 1000
        except ValueError:
            raise TelephonyError("sandbox: unknown call id") from None
        started_at = datetime.fromtimestamp(started, UTC)
        if script == "busy":
            return CallState(
                "failed",
                started_at=started_at,
                ended_reason="busy",
                error="provider_error: the line was busy",
            )
        if script == "no_answer":
            if time.time() - started < self.ring_seconds:
                return CallState("ringing", started_at=started_at)
            return CallState(
                "failed",
                started_at=started_at,
                ended_reason="no_answer",
                error="provider_error: nobody answered",
            )
        closed = _LINE_CLOSED.get(provider_call_id)
        if closed is not None:
            return closed[1]
        # A connected call is the runtime's to end and record.
        return CallState("in_progress", started_at=started_at)

    async def transfer_call(self, provider_call_id: str, to_number: str) -> None:
        if to_number.endswith(BUSY_SUFFIX):
            raise TelephonyError("sandbox: the transfer target was busy")

    async def send_sms(
        self,
        from_number: str | None,
        to_number: str,
        body: str,
        message_id: str,
        reference: str | None = None,
    ) -> str:
        if fails(to_number):
            raise TelephonyError("sandbox: the carrier rejected the destination number")
        # Derived from our id: a repeat of one message is recognisable as such.
        return "SM" + hashlib.sha256(message_id.encode()).hexdigest()[:32]

    async def aclose(self) -> None:
        return None
