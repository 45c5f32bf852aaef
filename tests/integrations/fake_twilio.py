"""A local HTTP server that speaks the part of Twilio's REST API (2010-04-01) we use.

State lives in memory: numbers the "carrier" offers per area code, the account's
IncomingPhoneNumbers, and Calls whose status advances on every read (queued, ringing,
in-progress, then the final status the test chose).
"""

from __future__ import annotations

import base64
import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from quart import Quart, Response, jsonify, request

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
    url: str = ""

    def own(self, phone_number: str, voice_url: str = "") -> str:
        sid = "PN" + uuid.uuid4().hex
        self.incoming[sid] = {"sid": sid, "phone_number": phone_number, "voice_url": voice_url}
        return sid

    def by_number(self, phone_number: str) -> dict[str, Any] | None:
        return next((n for n in self.incoming.values() if n["phone_number"] == phone_number),
                    None)


def _error(status: int, code: int, message: str) -> Response:
    response = jsonify({"code": code, "message": message, "more_info": "", "status": status})
    response.status_code = status
    return response


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
        number = (await request.form).get("PhoneNumber", "")
        for offered in state.available.values():
            if number in offered:
                offered.remove(number)
                response = jsonify(state.incoming[state.own(number)])
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
            return _error(400, 21606, "The 'From' phone number is not a valid, SMS-capable "
                                      "inbound phone number for your account")
        if not form.get("To", "").startswith("+"):
            return _error(400, 21211, "Invalid 'To' Phone Number")
        sid = "SM" + uuid.uuid4().hex
        state.messages[sid] = {"sid": sid, "to": form["To"], "from": form["From"],
                               "body": form.get("Body", "")}
        response = jsonify({"sid": sid, "status": "queued"})
        response.status_code = 201
        return response

    @app.post(f"{PREFIX}/Calls.json")
    async def create_call(account: str) -> Response:
        form = await request.form
        if state.by_number(form.get("From", "")) is None:
            return _error(400, 21212, "The 'From' number is not a valid phone number")
        sid = "CA" + uuid.uuid4().hex
        state.calls[sid] = {"sid": sid, "to": form["To"], "from": form["From"],
                            "url": form["Url"], "record": form.get("Record"),
                            "reads": 0, "status": "queued"}
        response = jsonify({"sid": sid, "status": "queued"})
        response.status_code = 201
        return response

    @app.get(f"{PREFIX}/Calls/<sid>.json")
    async def read_call(account: str, sid: str) -> Response:
        call = state.calls.get(sid)
        if call is None:
            return _error(404, 20404, "The requested resource was not found")
        steps = ["queued", "ringing", "in-progress", state.call_outcome]
        call["status"] = steps[min(call["reads"], len(steps) - 1)]
        call["reads"] += 1
        ended = call["status"] not in ("queued", "ringing", "in-progress")
        return jsonify({
            "sid": sid, "status": call["status"],
            "start_time": "Tue, 10 Mar 2026 12:00:00 +0000",
            "end_time": "Tue, 10 Mar 2026 12:01:15 +0000" if ended else None,
            "duration": str(state.call_duration) if ended else None,
        })

    @app.get(f"{PREFIX}/Calls/<sid>/Recordings.json")
    async def recordings(account: str, sid: str) -> Response:
        call = state.calls.get(sid, {})
        items = [{"sid": "RE" + sid[2:]}] if call.get("record") == "true" else []
        return jsonify({"recordings": items})

    return app
