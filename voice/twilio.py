"""Twilio's voice webhook on the voice runtime (CONTRACT 6 "Twilio", 9): TwiML that connects the
call to our own Media Streams WebSocket, `<Connect><Stream>` with the call's parameters.

- An outbound call's webhook URL carries the parameters we placed it with (call_id,
  sub_account_id and the token that proves we did); Twilio's AnsweredBy, present when the agent
  has voicemail detection on, becomes `answered_by`.
- Any other call rang one of our numbers: the number's agent answers it (api/calls/inbound.py);
  a number no agent answers is rejected. While the sub-account has no free place
  (max_concurrent_calls), or this process has SWITCHBOARD_VOICE_MAX_CALLS calls, the caller is
  held: TwiML pauses and asks this webhook again.

Every request must carry a valid `X-Twilio-Signature` (TWILIO_AUTH_TOKEN), else 403.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit
from xml.etree import ElementTree

import asyncpg
from starlette.requests import Request
from starlette.responses import Response

from api.calls import inbound
from api.contacts.service import valid_phone
from integrations.telephony.twilio import (
    SIGNATURE_HEADER,
    answered_by,
    default_voice_url,
    signature_valid,
)
from tenancy.call_tokens import call_token, token_valid
from tenancy.settings import Settings

log = logging.getLogger("switchboard.voice.twilio")

TWIML_PATH = "/voice/twilio/twiml"
STREAM_PATH = "/voice/twilio/stream"
XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>'
REJECT = f"{XML_DECLARATION}<Response><Reject /></Response>"
HOLD_SECONDS = 2
WS_SCHEMES = {"http": "ws", "https": "wss"}


def media_stream_url(settings: Settings) -> str:
    """The ws(s) form of SWITCHBOARD_VOICE_PUBLIC_URL (else SWITCHBOARD_VOICE_URL) + the stream
    path."""
    parts = urlsplit((settings.voice_public_url or settings.voice_url).rstrip("/"))
    scheme = WS_SCHEMES.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path + STREAM_PATH, "", ""))


def connect_twiml(stream_url: str, parameters: Mapping[str, str]) -> str:
    response = ElementTree.Element("Response")
    stream = ElementTree.SubElement(
        ElementTree.SubElement(response, "Connect"), "Stream", url=stream_url
    )
    for name, value in parameters.items():
        ElementTree.SubElement(stream, "Parameter", name=name, value=value)
    return XML_DECLARATION + ElementTree.tostring(response, encoding="unicode")


def hold_twiml(url: str) -> str:
    """Keep the caller on the line a moment, then ask `url` again."""
    response = ElementTree.Element("Response")
    ElementTree.SubElement(response, "Pause", length=str(HOLD_SECONDS))
    ElementTree.SubElement(response, "Redirect", method="POST").text = url
    return XML_DECLARATION + ElementTree.tostring(response, encoding="unicode")


def signed_urls(request: Request, settings: Settings) -> list[str]:
    """The URL Twilio signed: the configured webhook (a proxy may have changed what we see)
    with this request's query, or the request's own URL."""
    urls = [str(request.url)]
    configured = settings.twilio_voice_url or default_voice_url(settings.voice_public_url)
    if configured:
        parts = urlsplit(configured)
        urls.append(urlunsplit((parts.scheme, parts.netloc, parts.path, request.url.query, "")))
    return urls


class TwilioBridge:
    def __init__(
        self, settings: Settings, pool: asyncpg.Pool, busy: Callable[[], bool] = lambda: False
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.busy = busy  # the process is at SWITCHBOARD_VOICE_MAX_CALLS

    async def twiml(self, request: Request) -> Response:
        # Twilio posts application/x-www-form-urlencoded (Starlette's form() would need
        # python-multipart for this alone).
        params = parse_qsl(
            (await request.body()).decode("utf-8", "replace"), keep_blank_values=True
        )
        if not signature_valid(
            self.settings.twilio_auth_token,
            signed_urls(request, self.settings),
            params,
            request.headers.get(SIGNATURE_HEADER),
        ):
            log.warning("twilio webhook refused: missing or wrong signature")
            return Response("invalid signature", status_code=403, media_type="text/plain")
        if self.busy():  # held until this process has a free place for the stream
            return self._hold(request)
        fields = dict(params)
        query = request.query_params
        parameters = (
            self._outbound(query, fields)
            if "call_id" in query
            else await self._inbound(fields, query.get("agent_id"))
        )
        if parameters is None:
            return Response(REJECT, media_type="application/xml")
        if isinstance(parameters, str):  # held until the sub-account has a free place
            return self._hold(request)
        return Response(
            connect_twiml(media_stream_url(self.settings), parameters), media_type="application/xml"
        )

    def _hold(self, request: Request) -> Response:
        return Response(
            hold_twiml(signed_urls(request, self.settings)[-1]), media_type="application/xml"
        )

    def _outbound(
        self, query: Mapping[str, str], fields: Mapping[str, str]
    ) -> dict[str, str] | None:
        call_id, sub_account_id, token = (
            query.get(name, "") for name in ("call_id", "sub_account_id", "token")
        )
        if not token_valid(self.settings, sub_account_id, call_id, token):
            log.warning("twilio webhook for call %s without a valid token", call_id[:40])
            return None
        return {
            "call_id": call_id,
            "sub_account_id": sub_account_id,
            "token": token,
            "answered_by": answered_by(fields.get("AnsweredBy")),
        }

    async def _inbound(
        self, fields: Mapping[str, str], agent: str | None
    ) -> dict[str, str] | str | None:
        """The number's VoiceUrl names its agent (the adapter's assign_number), which tells
        apart sub-accounts that hold the same number."""
        caller, number = valid_phone(fields.get("From", "")), valid_phone(fields.get("To", ""))
        call_sid = fields.get("CallSid", "")
        try:
            agent_id = uuid.UUID(agent) if agent else None
        except ValueError:
            return None
        if caller is None or number is None or not call_sid:
            return None
        call = await inbound.answer_twilio(
            self.pool, inbound.Ringing(caller, number, "twilio", call_sid), agent_id
        )
        if call is None:
            return None
        if call.waiting:
            return "hold"
        return {
            "call_id": str(call.call_id),
            "sub_account_id": str(call.sub_account_id),
            "token": call_token(self.settings.key_pepper, call.sub_account_id, call.call_id),
            "answered_by": "unknown",
        }
