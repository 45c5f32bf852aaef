"""Telephony as an interface: carrier numbers, inbound routing to agents, outbound AI calls.

A provider does five things for the rest of the service, all behind `TelephonyProvider`:

- numbers: buy one from the carrier, import one the customer already holds, release one;
- inbound routing: point a number at an AI agent (a SIP dispatch rule, a voice URL) and remove it;
- outbound calls: place a call from one of our numbers with an agent on the line;
- call state: where a placed call is now, and once it has ended its duration, transcript and
  recording;
- text messages: send an SMS (campaigns and conversations).

`sandbox` (the default) needs no network; `twilio` speaks Twilio's REST API. A SIP bridge such as
LiveKit plugs in as another implementation (or wraps a carrier one) of the same protocol: its
`assign_number` creates the dispatch rule, its `place_call` dials through the SIP trunk.
Providers raise `TelephonyError` for every failure; callers never see transport exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

CallStatus = Literal["ringing", "in_progress", "completed", "failed"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed"})


class TelephonyError(Exception):
    """The provider refused or could not be reached; the message is safe to log."""


class NoNumbersAvailable(TelephonyError):
    """The carrier has no number to sell for this request (area code exhausted or unknown)."""


@dataclass(frozen=True)
class ProviderNumber:
    """A number the provider now holds for us, and its reference there."""

    phone_number: str
    provider_ref: str | None


@dataclass(frozen=True)
class HeldNumber:
    """A number of ours as the provider needs it for routing and release."""

    phone_number: str
    provider_ref: str | None
    purchased: bool
    dispatch_rule_id: str | None


@dataclass(frozen=True)
class OutboundCall:
    call_id: str
    from_number: str
    to_number: str
    agent_id: str
    language: str
    max_duration_seconds: int
    record: bool
    # What the voice runtime needs to know the call on its media stream (call_id,
    # sub_account_id and the token that proves we placed it): TwiML <Parameter>s on Twilio.
    stream_parameters: Mapping[str, str] = field(default_factory=dict)
    # Ask the carrier's answering-machine detection (Twilio `MachineDetection`) who answered.
    voicemail_detection: bool = False
    # `inbound`: a caller rang our number (from_number, the contact) and the carrier connects
    # them to the agent; only a carrier that simulates its callers (the sandbox) is asked to.
    direction: Literal["outbound", "inbound"] = "outbound"


@dataclass(frozen=True)
class CallState:
    status: CallStatus
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_seconds: int | None = None
    transcript: str | None = None
    recording_url: str | None = None
    error: str | None = None
    # CONTRACT 6: why it ended, who answered, what was said, and the WAV of both sides.
    ended_reason: str | None = None
    answered_by: str | None = None
    messages: list[dict[str, Any]] | None = None
    recording: bytes | None = None
    # CONTRACT 10: the model's tool calls in order, and whom the contact was handed to.
    tool_calls: list[dict[str, Any]] | None = None
    transferred_to: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


class TelephonyProvider(Protocol):
    name: str

    async def purchase_number(
        self, area_code: str | None, exclude: frozenset[str]
    ) -> ProviderNumber:
        """Buy a number (in `area_code` when given) that is not one of `exclude`."""
        ...

    async def import_number(self, phone_number: str) -> ProviderNumber:
        """Bring a number the customer already holds under our routing."""
        ...

    async def assign_number(self, number: HeldNumber, agent_id: str) -> str:
        """Route inbound calls of `number` to the agent; return the dispatch rule's id."""
        ...

    async def unassign_number(self, number: HeldNumber) -> bool:
        """Remove the number's inbound routing; True when a rule existed and was deleted."""
        ...

    async def release_number(self, number: HeldNumber) -> bool:
        """Give a purchased number back (an imported one loses its routing only).

        True when an inbound dispatch rule was deleted on the way.
        """
        ...

    async def place_call(self, call: OutboundCall) -> str:
        """Dial out; return the provider's call id."""
        ...

    async def call_state(self, provider_call_id: str) -> CallState: ...

    async def transfer_call(self, provider_call_id: str, to_number: str) -> None:
        """Connect the contact of a live call to `to_number`; the agent's stream leaves the call
        (CONTRACT 10 transfer_call). TelephonyError when the carrier cannot (busy, refused)."""
        ...

    async def send_sms(
        self,
        from_number: str | None,
        to_number: str,
        body: str,
        message_id: str,
        reference: str | None = None,
    ) -> str:
        """Send a text message; return the provider's message id.

        `message_id` is ours and stable for one message, so a provider that deduplicates can
        drop a repeat; `from_number` None means the provider's default sender; `reference`
        comes back with the provider's status reports (Twilio: `ref` on the StatusCallback).
        """
        ...

    async def aclose(self) -> None: ...


def telephony_provider(name: str) -> TelephonyProvider:
    """The provider `SWITCHBOARD_TELEPHONY` names, configured from the environment."""
    if name == "sandbox":
        from integrations.telephony.sandbox import SandboxTelephony

        return SandboxTelephony.from_env()
    if name == "twilio":
        from integrations.telephony.twilio import TwilioTelephony

        return TwilioTelephony.from_env()
    raise ValueError(f"unknown telephony provider {name!r}")


class Providers:
    """The providers one unit of work needs, by name, made on first use and closed together.

    Work on an existing number or call uses the provider recorded with it, so switching
    `SWITCHBOARD_TELEPHONY` never strands what the previous provider holds; new numbers go to
    the default.
    """

    def __init__(self, default: str) -> None:
        self.default = default
        self._made: dict[str, TelephonyProvider] = {}

    def get(self, name: str | None = None) -> TelephonyProvider:
        name = name or self.default
        if name not in self._made:
            self._made[name] = telephony_provider(name)
        return self._made[name]

    async def aclose(self) -> None:
        for provider in self._made.values():
            await provider.aclose()
        self._made.clear()


__all__ = [
    "CallState",
    "CallStatus",
    "HeldNumber",
    "NoNumbersAvailable",
    "OutboundCall",
    "ProviderNumber",
    "Providers",
    "TERMINAL",
    "TelephonyError",
    "TelephonyProvider",
    "telephony_provider",
]
