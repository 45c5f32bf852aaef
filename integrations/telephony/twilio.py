"""The `twilio` telephony provider, over Twilio's REST API (2010-04-01).

Numbers are IncomingPhoneNumbers of the account; inbound routing to an agent is the number's
VoiceUrl pointing at the voice bridge (`TWILIO_VOICE_URL`, by default the voice runtime's
`/voice/twilio/twiml`, which answers with TwiML that connects the call to its Media Streams
WebSocket); outbound calls are Calls whose Url is the same bridge, with the call's stream
parameters in its query. Imported numbers must already be in the Twilio account. Transcripts are
the voice bridge's business, so this provider reports none.

Twilio signs every webhook it sends (`X-Twilio-Signature`, `signature` below).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Iterable
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode, urlsplit
from xml.etree.ElementTree import Element, tostring

import httpx

from integrations.telephony import (
    CallState,
    CallStatus,
    HeldNumber,
    NoNumbersAvailable,
    OutboundCall,
    ProviderNumber,
    TelephonyError,
)

API_VERSION = "2010-04-01"
STATUSES: dict[str, CallStatus] = {
    "queued": "ringing",
    "initiated": "ringing",
    "ringing": "ringing",
    "in-progress": "in_progress",
    "completed": "completed",
    "busy": "failed",
    "failed": "failed",
    "no-answer": "failed",
    "canceled": "failed",
}

# A call that never connected: its ended_reason and error, by Twilio's final status (CONTRACT 9).
NEVER_CONNECTED: dict[str, tuple[str, str]] = {
    "busy": ("busy", "provider_error: the line was busy"),
    "no-answer": ("no_answer", "provider_error: nobody answered"),
    "canceled": ("failed", "provider_error: the call was canceled"),
}

SIGNATURE_HEADER = "X-Twilio-Signature"
VOICE_PATH = "/voice/twilio/twiml"
# Our webhooks on the API (SWITCHBOARD_PUBLIC_URL): inbound messages, message status callbacks.
SMS_PATH = "/webhooks/providers/twilio/sms"
STATUS_PATH = "/webhooks/providers/twilio/status"
# Twilio's AnsweredBy (MachineDetection) as a call's answered_by (CONTRACT 6, 9).
ANSWERED_BY = {
    "human": "human",
    "unknown": "unknown",
    "fax": "machine",
    "machine_start": "machine",
    "machine_end_beep": "machine",
    "machine_end_silence": "machine",
    "machine_end_other": "machine",
}


def signature(auth_token: str, url: str, params: Iterable[tuple[str, str]]) -> str:
    """Twilio's request signature: base64 HMAC-SHA1, under the auth token, of the full URL it
    requested followed by every POST parameter's name and value, sorted by name."""
    payload = url + "".join(name + value for name, value in sorted(params))
    digest = hmac.new(auth_token.encode(), payload.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_valid(
    auth_token: str | None,
    urls: Iterable[str],
    params: Iterable[tuple[str, str]],
    given: str | None,
) -> bool:
    """Whether `given` signs `params` at one of `urls` (where a proxy may have moved us)."""
    if not auth_token or not given:
        return False
    pairs = list(params)
    return any(hmac.compare_digest(signature(auth_token, url, pairs), given) for url in urls)


def answered_by(value: str | None) -> str:
    return ANSWERED_BY.get((value or "").lower(), "unknown")


def default_voice_url(voice_public_url: str | None) -> str | None:
    """`TWILIO_VOICE_URL` when unset: the voice runtime's TwiML route (CONTRACT 9)."""
    if not voice_public_url:
        return None
    parts = urlsplit(voice_public_url.rstrip("/"))
    return f"{parts.scheme}://{parts.netloc}{parts.path}{VOICE_PATH}"


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None


class TwilioTelephony:
    name = "twilio"

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        voice_url: str,
        *,
        base_url: str = "https://api.twilio.com",
        country: str = "US",
        timeout: float = 10.0,
        sms_from: str | None = None,
        status_callback: str | None = None,
        sms_url: str | None = None,
    ) -> None:
        self.account_sid = account_sid
        self.sms_from = sms_from
        self.status_callback = status_callback
        # Our inbound-SMS webhook, set as the SmsUrl of every number we buy or import.
        self.sms_url = sms_url
        self.voice_url = voice_url
        self.country = country
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(
            base_url=self.base_url, auth=(account_sid, auth_token), timeout=timeout
        )

    @classmethod
    def from_env(cls) -> TwilioTelephony:
        voice_url = os.environ.get("TWILIO_VOICE_URL") or default_voice_url(
            os.environ.get("SWITCHBOARD_VOICE_PUBLIC_URL")
        )
        missing = [
            name for name in ("TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN") if not os.environ.get(name)
        ]
        if not voice_url:
            missing.append("TWILIO_VOICE_URL (or SWITCHBOARD_VOICE_PUBLIC_URL)")
        if missing or not voice_url:
            raise TelephonyError("twilio is not configured: set " + ", ".join(missing))
        public_url = (os.environ.get("SWITCHBOARD_PUBLIC_URL") or "http://127.0.0.1:8000").rstrip(
            "/"
        )
        return cls(
            os.environ["TWILIO_ACCOUNT_SID"],
            os.environ["TWILIO_AUTH_TOKEN"],
            voice_url,
            base_url=os.environ.get("TWILIO_API_BASE_URL", "https://api.twilio.com"),
            country=os.environ.get("TWILIO_COUNTRY", "US"),
            sms_from=os.environ.get("TWILIO_SMS_FROM") or None,
            status_callback=public_url + STATUS_PATH,
            sms_url=public_url + SMS_PATH,
        )

    def _path(self, resource: str) -> str:
        return f"/{API_VERSION}/Accounts/{self.account_sid}/{resource}"

    async def _request(
        self,
        method: str,
        resource: str,
        *,
        params: dict[str, Any] | None = None,
        form: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        try:
            response = await self.http.request(
                method, self._path(resource), params=params, data=form
            )
        except httpx.HTTPError as exc:
            raise TelephonyError(f"twilio unreachable: {type(exc).__name__}") from None
        if response.status_code == 204:
            return {}
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            raise TelephonyError(
                f"twilio answered {response.status_code}"
                f" (code {body.get('code')}): {body.get('message', '')}"
            )
        return body if isinstance(body, dict) else {}

    def _agent_url(self, **query: str) -> str:
        separator = "&" if "?" in self.voice_url else "?"
        return f"{self.voice_url}{separator}{urlencode(query)}"

    async def purchase_number(
        self, area_code: str | None, exclude: frozenset[str]
    ) -> ProviderNumber:
        params: dict[str, Any] = {"VoiceEnabled": "true", "PageSize": 30}
        if area_code:
            params["AreaCode"] = area_code
        found = await self._request(
            "GET", f"AvailablePhoneNumbers/{self.country}/Local.json", params=params
        )
        candidates = [
            item["phone_number"]
            for item in found.get("available_phone_numbers", [])
            if item.get("phone_number") not in exclude
        ]
        if not candidates:
            raise NoNumbersAvailable(
                "twilio has no numbers available"
                + (f" in area code {area_code}" if area_code else "")
            )
        bought = await self._request(
            "POST",
            "IncomingPhoneNumbers.json",
            form={"PhoneNumber": candidates[0], **self._sms_webhook()},
        )
        return ProviderNumber(bought["phone_number"], bought["sid"])

    async def import_number(self, phone_number: str) -> ProviderNumber:
        found = await self._request(
            "GET", "IncomingPhoneNumbers.json", params={"PhoneNumber": phone_number}
        )
        numbers = found.get("incoming_phone_numbers", [])
        if not numbers:
            raise TelephonyError("the number is not in the Twilio account")
        if self.sms_url:
            await self._request(
                "POST", f"IncomingPhoneNumbers/{numbers[0]['sid']}.json", form=self._sms_webhook()
            )
        return ProviderNumber(numbers[0]["phone_number"], numbers[0]["sid"])

    def _sms_webhook(self) -> dict[str, str]:
        return {"SmsUrl": self.sms_url, "SmsMethod": "POST"} if self.sms_url else {}

    def _sid(self, number: HeldNumber) -> str:
        if not number.provider_ref:
            raise TelephonyError("the number has no Twilio sid")
        return number.provider_ref

    async def assign_number(self, number: HeldNumber, agent_id: str) -> str:
        sid = self._sid(number)
        await self._request(
            "POST",
            f"IncomingPhoneNumbers/{sid}.json",
            form={"VoiceUrl": self._agent_url(agent_id=agent_id), "VoiceMethod": "POST"},
        )
        return f"voice-url:{sid}"

    async def unassign_number(self, number: HeldNumber) -> bool:
        if number.dispatch_rule_id is None:
            return False
        await self._request(
            "POST", f"IncomingPhoneNumbers/{self._sid(number)}.json", form={"VoiceUrl": ""}
        )
        return True

    async def release_number(self, number: HeldNumber) -> bool:
        if number.purchased:
            await self._request("DELETE", f"IncomingPhoneNumbers/{self._sid(number)}.json")
            return number.dispatch_rule_id is not None
        return await self.unassign_number(number)

    async def place_call(self, call: OutboundCall) -> str:
        if call.direction != "outbound":
            raise TelephonyError("twilio places outbound calls only")
        # The bridge reads the stream parameters back from its own URL (which Twilio signs)
        # and hands them to the Media Stream as <Parameter>s.
        query = {"agent_id": call.agent_id, "call_id": call.call_id, **call.stream_parameters}
        form = {
            "To": call.to_number,
            "From": call.from_number,
            "Url": self._agent_url(**query),
            "Method": "POST",
            "TimeLimit": str(call.max_duration_seconds),
            "Record": "true" if call.record else "false",
        }
        if call.voicemail_detection:
            # The webhook waits for the greeting's end, so the agent speaks after the beep.
            form["MachineDetection"] = "DetectMessageEnd"
        placed = await self._request("POST", "Calls.json", form=form)
        return str(placed["sid"])

    async def call_state(self, provider_call_id: str) -> CallState:
        call = await self._request("GET", f"Calls/{provider_call_id}.json")
        status = STATUSES.get(call.get("status", ""), "failed")
        state = CallState(status, started_at=_time(call.get("start_time")))
        if status == "failed":
            reason, error = NEVER_CONNECTED.get(
                call.get("status", ""),
                ("failed", f"provider_error: call {call.get('status', 'unknown')}"),
            )
            return CallState(
                "failed",
                started_at=state.started_at,
                ended_at=_time(call.get("end_time")),
                ended_reason=reason,
                error=error,
            )
        if status != "completed":
            return state
        recordings = await self._request("GET", f"Calls/{provider_call_id}/Recordings.json")
        items = recordings.get("recordings", [])
        recording_url = (
            f"{self.base_url}{self._path('Recordings')}/{items[0]['sid']}.mp3" if items else None
        )
        return CallState(
            "completed",
            started_at=state.started_at,
            ended_at=_time(call.get("end_time")),
            duration_seconds=int(call.get("duration") or 0),
            recording_url=recording_url,
        )

    async def transfer_call(self, provider_call_id: str, to_number: str) -> None:
        """The live call is redirected to TwiML that dials `to_number`: its Media Stream (the
        agent) ends and Twilio connects the contact to the number."""
        dial = Element("Dial")
        dial.text = to_number
        response = Element("Response")
        response.append(dial)
        await self._request(
            "POST",
            f"Calls/{provider_call_id}.json",
            form={"Twiml": tostring(response, encoding="unicode")},
        )

    async def send_sms(
        self,
        from_number: str | None,
        to_number: str,
        body: str,
        message_id: str,
        reference: str | None = None,
    ) -> str:
        sender = from_number or self.sms_from
        if not sender:
            raise TelephonyError("twilio: no sender number (set TWILIO_SMS_FROM)")
        form = {"To": to_number, "From": sender, "Body": body}
        if self.status_callback:
            form["StatusCallback"] = self.status_callback + (
                "?" + urlencode({"ref": reference}) if reference else ""
            )
        sent = await self._request("POST", "Messages.json", form=form)
        return str(sent["sid"])

    async def aclose(self) -> None:
        await self.http.aclose()
