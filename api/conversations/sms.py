"""Text messages for campaigns and conversations, sent through the telephony provider.

`SWITCHBOARD_TELEPHONY` names the provider (sandbox by default, or twilio); its `send_sms`
does the work. Provider failures surface as `SmsError`, whose message is safe to show.
"""

from __future__ import annotations

from integrations.telephony import TelephonyError, telephony_provider
from tenancy.settings import get_settings


class SmsError(Exception):
    """The provider refused or could not be reached; the message is safe to show."""


class TelephonySms:
    def __init__(self, provider_name: str) -> None:
        self.name = provider_name

    async def send_sms(
        self,
        to: str,
        body: str,
        message_id: str,
        from_number: str | None = None,
        reference: str | None = None,
    ) -> str:
        """Send `body` to `to`; return the provider's id of the message. `reference` (the
        sending sub-account) comes back with the provider's status reports."""
        try:
            provider = telephony_provider(self.name)
        except (TelephonyError, ValueError) as exc:
            raise SmsError(str(exc)) from None
        try:
            return await provider.send_sms(from_number, to, body, message_id, reference)
        except TelephonyError as exc:
            raise SmsError(str(exc)) from None
        finally:
            await provider.aclose()


def sms_provider(name: str | None = None) -> TelephonySms:
    return TelephonySms(name or get_settings().telephony)
