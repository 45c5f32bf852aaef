"""A local HTTP server that speaks the part of Twilio's REST API (2010-04-01) we use.

State lives in memory: numbers the "carrier" offers per area code, the account's
IncomingPhoneNumbers, and Calls whose status advances on every read (queued, ringing,
in-progress, then the final status the test chose).

Messages: `Messages.json` keeps what was sent (and its StatusCallback); `receive_sms` posts an
inbound text to our SMS webhook and `report_status` a message status callback to the one the
message asked for, both form-encoded and signed as Twilio signs them (X-Twilio-Signature over the
webhook's URL and the sorted parameters). They go to a live server over HTTP, or through a Quart
test client given as `client` (the URL's path and query are used, the signature covers it whole).

With `bridge` on, a call is carried out as Twilio carries it instead: its voice webhook (the
call's `Url`, or for `ring` the number's VoiceUrl) is POSTed with a valid X-Twilio-Signature
(CallSid, From, To, and AnsweredBy when MachineDetection was asked for), the TwiML's
`<Connect><Stream>` is dialled over Media Streams with its `<Parameter>`s, and the callee (or
caller) plays the sandbox script of its number (sandbox_media.run_contact). The call is
`in-progress` while the stream runs and `completed` when it ends.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import httpx
from quart import Quart, Response, jsonify, request

from integrations.telephony import TelephonyError
from integrations.telephony.sandbox_media import (
    NEVER_CONNECTS,
    ContactResult,
    ContactSession,
    run_contact,
    script_for,
)
from integrations.telephony.twilio import SIGNATURE_HEADER, SMS_PATH, signature
from tests.conftest import running_worker

PREFIX = "/2010-04-01/Accounts/<account>"


@dataclass
class FakeTwilio:
    account_sid: str = field(default_factory=lambda: "AC" + uuid.uuid4().hex)
    auth_token: str = field(default_factory=lambda: uuid.uuid4().hex)
    available: dict[str, list[str]] = field(default_factory=dict)
    incoming: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    call_outcome: str = "completed"
    call_duration: int = 75
    # How long a caller put on hold (<Pause> + <Redirect>) waits before hanging up.
    hold_patience: float = 60.0
    url: str = ""
    bridge: bool = False
    # A status Twilio reports on a new message before it answers the request that sent it (its
    # callbacks race its API's answer), posted through `api_client` (the Quart test client).
    report_before_answer: str | None = None
    api_client: Any = None
    # Every voice webhook the bridge sent: {url, params, status, twiml}.
    webhooks: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, ContactResult] = field(default_factory=dict)
    carrying: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    # Every live-call update (POST Calls/{sid}.json): {sid, Twiml, ...}.
    redirects: list[dict[str, Any]] = field(default_factory=list)

    def signed_headers(self, url: str, params: dict[str, str]) -> dict[str, str]:
        return {SIGNATURE_HEADER: signature(self.auth_token, url, params.items())}

    async def post_webhook(
        self,
        url: str,
        params: dict[str, str],
        client: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """POST `params` form-encoded to `url`, signed (unless `headers` replace the
        signature): over HTTP, or through the Quart test `client`."""
        headers = self.signed_headers(url, params) if headers is None else headers
        if client is None:
            async with httpx.AsyncClient(timeout=10) as http:
                return await http.post(url, data=params, headers=headers)
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        return await client.post(target, form=params, headers=headers)

    def inbound_sms(
        self, from_number: str, to_number: str, body: str, sid: str | None = None
    ) -> dict[str, str]:
        """The parameters of Twilio's incoming-message webhook."""
        sid = sid or "SM" + uuid.uuid4().hex
        return {
            "ToCountry": "US",
            "SmsMessageSid": sid,
            "NumMedia": "0",
            "SmsSid": sid,
            "SmsStatus": "received",
            "Body": body,
            "To": to_number,
            "NumSegments": "1",
            "MessageSid": sid,
            "AccountSid": self.account_sid,
            "From": from_number,
            "ApiVersion": "2010-04-01",
        }

    async def receive_sms(
        self,
        public_url: str,
        from_number: str,
        to_number: str,
        body: str,
        sid: str | None = None,
        client: Any = None,
    ) -> Any:
        """A text from `from_number` to our `to_number`, posted to our SMS webhook."""
        return await self.post_webhook(
            public_url.rstrip("/") + SMS_PATH,
            self.inbound_sms(from_number, to_number, body, sid),
            client,
        )

    def status_params(self, sid: str, status: str, error_code: str | None = None) -> dict[str, str]:
        message = self.messages[sid]
        params = {
            "MessageSid": sid,
            "SmsSid": sid,
            "MessageStatus": status,
            "SmsStatus": status,
            "From": message["from"],
            "To": message["to"],
            "AccountSid": self.account_sid,
            "ApiVersion": "2010-04-01",
        }
        if error_code:
            params["ErrorCode"] = error_code
        return params

    async def report_status(
        self, sid: str, status: str, error_code: str | None = None, client: Any = None
    ) -> Any:
        """The status callback of a message we were asked to send, to its StatusCallback."""
        return await self.post_webhook(
            self.messages[sid]["status_callback"],
            self.status_params(sid, status, error_code),
            client,
        )

    def own(self, phone_number: str, voice_url: str = "") -> str:
        sid = "PN" + uuid.uuid4().hex
        self.incoming[sid] = {"sid": sid, "phone_number": phone_number, "voice_url": voice_url}
        return sid

    def by_number(self, phone_number: str) -> dict[str, Any] | None:
        return next((n for n in self.incoming.values() if n["phone_number"] == phone_number), None)

    def ring(self, from_number: str, to_number: str) -> str:
        """An inbound call from `from_number` to our number: its VoiceUrl is asked what to do."""
        number = self.by_number(to_number)
        assert number is not None and number["voice_url"], f"{to_number} has no VoiceUrl"
        sid = "CA" + uuid.uuid4().hex
        self.calls[sid] = {
            "sid": sid,
            "to": to_number,
            "from": from_number,
            "url": number["voice_url"],
            "direction": "inbound",
            "reads": 0,
            "status": "ringing",
            "bridged": True,
        }
        self._carry(sid)
        return sid

    async def ended(self, sid: str) -> dict[str, Any]:
        await self.carrying[sid]
        return self.calls[sid]

    def _carry(self, sid: str) -> None:
        self.carrying[sid] = asyncio.create_task(self._connect(self.calls[sid]))

    async def _connect(self, call: dict[str, Any]) -> None:
        inbound = call["direction"] == "inbound"
        script = script_for(call["from"] if inbound else call["to"])
        if script in NEVER_CONNECTS:
            call["status"] = "no-answer" if script == "no_answer" else "busy"
            return
        call.update(status="in-progress", start_time=datetime.now(UTC))
        params = {
            "AccountSid": self.account_sid,
            "ApiVersion": "2010-04-01",
            "CallSid": call["sid"],
            "CallStatus": "ringing" if inbound else "in-progress",
            "Direction": "inbound" if inbound else "outbound-api",
            "From": call["from"],
            "To": call["to"],
        }
        if call.get("machine_detection"):
            params["AnsweredBy"] = "machine_end_beep" if script == "answering_machine" else "human"
        stream = await self._fetch_twiml(call["url"], params)
        try:
            if stream is None:
                call["status"] = "failed"
                return
            url, parameters = stream
            self.results[call["sid"]] = await run_contact(
                url,
                ContactSession(
                    call_sid=call["sid"],
                    account_sid=self.account_sid,
                    stream_sid="MZ" + uuid.uuid4().hex,
                    script=script,
                    custom_parameters=parameters,
                    max_seconds=120,
                ),
            )
            call["status"] = "completed"
        except TelephonyError:
            call["status"] = "failed"
        finally:
            call["end_time"] = datetime.now(UTC)

    async def _fetch_twiml(
        self, url: str, params: dict[str, str]
    ) -> tuple[str, dict[str, str]] | None:
        """POST the voice webhook, signed, following `<Pause>` + `<Redirect>` (a caller on hold)
        for as long as `hold_patience` seconds; the TwiML's stream URL and parameters, if any."""
        held_until = asyncio.get_running_loop().time() + self.hold_patience
        while True:
            headers = {SIGNATURE_HEADER: signature(self.auth_token, url, params.items())}
            async with httpx.AsyncClient(timeout=10) as http:
                response = await http.post(url, data=params, headers=headers)
            self.webhooks.append(
                {
                    "url": url,
                    "params": params,
                    "status": response.status_code,
                    "twiml": response.text,
                }
            )
            if response.status_code != 200:
                return None
            twiml = ElementTree.fromstring(response.text)
            stream = twiml.find("./Connect/Stream")
            if stream is not None:
                return stream.get("url", ""), {
                    p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")
                }
            redirect = twiml.find("./Redirect")
            if redirect is None or asyncio.get_running_loop().time() > held_until:
                return None  # rejected, or the caller gave up waiting
            pause = twiml.find("./Pause")
            await asyncio.sleep(float(pause.get("length", "1")) if pause is not None else 1.0)
            url = (redirect.text or url).strip()


def _error(status: int, code: int, message: str) -> Response:
    response = jsonify({"code": code, "message": message, "more_info": "", "status": status})
    response.status_code = status
    return response


def _bridged(call: dict[str, Any]) -> dict[str, Any]:
    start, end = call.get("start_time"), call.get("end_time")
    return {
        "sid": call["sid"],
        "status": call["status"],
        "start_time": format_datetime(start) if start else None,
        "end_time": format_datetime(end) if end else None,
        "duration": str(round((end - start).total_seconds())) if start and end else None,
    }


def twilio_app(state: FakeTwilio) -> Quart:
    app = Quart("fake-twilio")

    @app.before_request
    async def authenticate() -> Response | None:
        expected = base64.b64encode(f"{state.account_sid}:{state.auth_token}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {expected}":
            return _error(401, 20003, "Authenticate")
        if request.view_args and request.view_args.get("account") != state.account_sid:
            return _error(404, 20404, "The requested resource was not found")
        form = dict(await request.form)
        state.requests.append((request.method, request.path, form))
        return None

    @app.get(f"{PREFIX}/AvailablePhoneNumbers/<country>/Local.json")
    async def available(account: str, country: str) -> Response:
        numbers = state.available.get(request.args.get("AreaCode", ""), [])
        if not request.args.get("AreaCode"):
            numbers = list(itertools.chain(*state.available.values()))
        return jsonify({"available_phone_numbers": [{"phone_number": n} for n in numbers]})

    @app.get(f"{PREFIX}/IncomingPhoneNumbers.json")
    async def list_incoming(account: str) -> Response:
        wanted = request.args.get("PhoneNumber")
        found = [n for n in state.incoming.values() if wanted in (None, n["phone_number"])]
        return jsonify({"incoming_phone_numbers": found})

    @app.post(f"{PREFIX}/IncomingPhoneNumbers.json")
    async def buy(account: str) -> Response:
        form = await request.form
        number = form.get("PhoneNumber", "")
        for offered in state.available.values():
            if number in offered:
                offered.remove(number)
                sid = state.own(number)
                if form.get("SmsUrl"):
                    state.incoming[sid]["sms_url"] = form["SmsUrl"]
                response = jsonify(state.incoming[sid])
                response.status_code = 201
                return response
        return _error(400, 21422, "PhoneNumber requested is not available")

    @app.post(f"{PREFIX}/IncomingPhoneNumbers/<sid>.json")
    async def update(account: str, sid: str) -> Response:
        if sid not in state.incoming:
            return _error(404, 20404, "The requested resource was not found")
        form = await request.form
        if "VoiceUrl" in form:
            state.incoming[sid]["voice_url"] = form["VoiceUrl"]
        if "SmsUrl" in form:
            state.incoming[sid]["sms_url"] = form["SmsUrl"]
        return jsonify(state.incoming[sid])

    @app.delete(f"{PREFIX}/IncomingPhoneNumbers/<sid>.json")
    async def release(account: str, sid: str) -> Response:
        if state.incoming.pop(sid, None) is None:
            return _error(404, 20404, "The requested resource was not found")
        return Response("", status=204)

    @app.post(f"{PREFIX}/Messages.json")
    async def create_message(account: str) -> Response:
        form = await request.form
        if state.by_number(form.get("From", "")) is None:
            return _error(
                400,
                21606,
                "The 'From' phone number is not a valid, SMS-capable "
                "inbound phone number for your account",
            )
        if not form.get("To", "").startswith("+"):
            return _error(400, 21211, "Invalid 'To' Phone Number")
        sid = "SM" + uuid.uuid4().hex
        state.messages[sid] = {
            "sid": sid,
            "to": form["To"],
            "from": form["From"],
            "body": form.get("Body", ""),
        }
        if form.get("StatusCallback"):
            state.messages[sid]["status_callback"] = form["StatusCallback"]
            if state.report_before_answer:
                await state.report_status(sid, state.report_before_answer, client=state.api_client)
        response = jsonify({"sid": sid, "status": "queued"})
        response.status_code = 201
        return response

    @app.post(f"{PREFIX}/Calls.json")
    async def create_call(account: str) -> Response:
        form = await request.form
        if state.by_number(form.get("From", "")) is None:
            return _error(400, 21212, "The 'From' number is not a valid phone number")
        sid = "CA" + uuid.uuid4().hex
        state.calls[sid] = {
            "sid": sid,
            "to": form["To"],
            "from": form["From"],
            "url": form["Url"],
            "record": form.get("Record"),
            "reads": 0,
            "status": "queued",
            "direction": "outbound-api",
            "machine_detection": form.get("MachineDetection"),
            "bridged": state.bridge,
        }
        if state.bridge:
            state._carry(sid)
        response = jsonify({"sid": sid, "status": "queued"})
        response.status_code = 201
        return response

    @app.get(f"{PREFIX}/Calls/<sid>.json")
    async def read_call(account: str, sid: str) -> Response:
        call = state.calls.get(sid)
        if call is None:
            return _error(404, 20404, "The requested resource was not found")
        if call["bridged"]:
            return jsonify(_bridged(call))
        steps = ["queued", "ringing", "in-progress", state.call_outcome]
        call["status"] = steps[min(call["reads"], len(steps) - 1)]
        call["reads"] += 1
        ended = call["status"] not in ("queued", "ringing", "in-progress")
        return jsonify(
            {
                "sid": sid,
                "status": call["status"],
                "start_time": "Tue, 10 Mar 2026 12:00:00 +0000",
                "end_time": "Tue, 10 Mar 2026 12:01:15 +0000" if ended else None,
                "duration": str(state.call_duration) if ended else None,
            }
        )

    @app.post(f"{PREFIX}/Calls/<sid>.json")
    async def update_call(account: str, sid: str) -> Response:
        """A live call redirected (`Twiml`, e.g. a transfer's <Dial>): kept in `redirects`."""
        call = state.calls.get(sid)
        if call is None:
            return _error(404, 20404, "The requested resource was not found")
        form = await request.form
        state.redirects.append({"sid": sid, **form.to_dict()})
        return jsonify({"sid": sid, "status": call["status"]})

    @app.get(f"{PREFIX}/Calls/<sid>/Recordings.json")
    async def recordings(account: str, sid: str) -> Response:
        call = state.calls.get(sid, {})
        items = [{"sid": "RE" + sid[2:]}] if call.get("record") == "true" else []
        return jsonify({"recordings": items})

    return app


@contextlib.asynccontextmanager
async def worker_on_twilio(
    state: FakeTwilio, monkeypatch: Any, database_url: str, redis_url: str, **env: str
) -> AsyncIterator[Any]:
    """The real worker with SWITCHBOARD_TELEPHONY=twilio pointed at the fake (and `env`)."""
    from tenancy.settings import get_settings

    for name, value in {
        "SWITCHBOARD_TELEPHONY": "twilio",
        "TWILIO_ACCOUNT_SID": state.account_sid,
        "TWILIO_AUTH_TOKEN": state.auth_token,
        "TWILIO_API_BASE_URL": state.url,
        **env,
    }.items():
        monkeypatch.setenv(name, value)
    if "TWILIO_VOICE_URL" not in env:
        monkeypatch.delenv("TWILIO_VOICE_URL", raising=False)
    get_settings.cache_clear()
    try:
        async with running_worker(database_url, redis_url) as running:
            yield running
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
