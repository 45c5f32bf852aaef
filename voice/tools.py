"""The model's functions on a call (CONTRACT 10 "Tools"): the built-in end_call and the agent's
tools, offered through Pipecat's FunctionSchema (each LLM adapter writes them in its vendor's
format) and run here, each call recorded on the call's `tool_calls` in order.

- `http`: a Standard Webhooks signed POST of `{tool_call_id, call_id, agent_id, contact_id, tool,
  arguments}` with the tool's headers, the SSRF guard again at call time; a 2xx answer's first
  16 KiB (JSON as parsed, else text) is the result, anything else `{"error": ...}`.
- `transfer_call`: the agent says the tool's message, the carrier connects the contact to the
  number and the agent leaves (ended_reason `transferred`); a carrier that cannot (the sandbox's
  busy 0187) gives the model an error and the call goes on.
- `send_sms`: the text goes to the call's contact under POST /contacts/{id}/messages's rules;
  a text over 1,600 characters is `{"error": "content_too_long"}` and nothing is sent.
- `check_availability`: up to 10 free slots of the tool's calendar from `date` (default today in
  the calendar's timezone) on, as `{slots: [{start, start_local}]}`.
- `book_appointment`: books the call's contact into the slot starting at `start` under POST
  /appointments's rules (source `agent`, the call's id): `{appointment_id, start, end}`, or
  `{error: "slot_unavailable"}` (any other refusal: `{error: <code>}`).

A tool runs in a task of its own that outlives the model's wait for it: a result arriving after
the contact hung up is still recorded (`settle` waits for it before the call's record is written).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.frames.frames import EndWorkerFrame, FunctionCallResultProperties
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallHandler, FunctionCallParams

from api.appointments.service import book, parse_start
from api.calendars.service import next_free_slots, slot_out
from api.conversations.service import MAX_SMS, Outgoing, send_to_contact
from integrations.telephony import Providers, TelephonyError
from integrations.webhooks import post_for_answer
from tenancy.clock import iso, utcnow
from tenancy.errors import APIError
from tenancy.scope import TenantScope
from tenancy.settings import Settings
from tenancy.storable import storable

log = logging.getLogger("switchboard.voice.tools")

END_CALL = FunctionSchema(
    name="end_call",
    description="Hang up the phone call. Use it once the conversation has come to an end.",
    properties={},
    required=[],
)
OFFERED_TYPES = ("http", "transfer_call", "send_sms", "check_availability", "book_appointment")
# The most free slots check_availability answers with.
SLOT_LIMIT = 10
# check_availability offers only slots still bookable this long after it answers: the contact
# needs a moment to choose, and a slot at the edge of the calendar's minimum notice would be
# refused (slot_unavailable) by the time the model books it.
OFFER_MARGIN = timedelta(minutes=5)
RESULT_LIMIT = 16 * 1024
DEFAULT_TIMEOUT_SECONDS = 10
# How long past its own timeout the model's wait for a tool may last (Pipecat cancels it then).
WAIT_SLACK_SECONDS = 5
# The longest a transfer's message may take to be spoken before the carrier is asked anyway.
MESSAGE_SECONDS = 30.0
SELECT_ORGANISATION = "SELECT organisation_id FROM control.sub_accounts WHERE id = $1"


@dataclass(frozen=True)
class CallFacts:
    """The call as its tools need it."""

    scope: TenantScope
    call_id: uuid.UUID
    agent_id: uuid.UUID
    contact_id: uuid.UUID
    provider: str
    provider_call_id: str | None


FunctionEntry = tuple[FunctionSchema, FunctionCallHandler, float | None]


class CallTools:
    """The functions of one call and the record of every call the model made of them.

    `say` speaks a sentence and returns once it has been spoken; `leave` ends the call with a
    reason (after a transfer)."""

    def __init__(
        self,
        settings: Settings,
        facts: CallFacts,
        tools: list[dict[str, Any]],
        say: Callable[[str], Awaitable[None]],
        leave: Callable[[str], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.facts = facts
        self.tools = [tool for tool in tools if tool["type"] in OFFERED_TYPES]
        self.say = say
        self.leave = leave
        self.calls: list[dict[str, Any]] = []
        self.transferred_to: str | None = None
        self._running: set[asyncio.Task[Any]] = set()

    def functions(self) -> list[FunctionEntry]:
        """Each function the model is offered, its handler and how long the model waits."""
        out: list[FunctionEntry] = [(END_CALL, self.end_call, None)]
        for tool in self.tools:
            parameters = tool.get("parameters") or {}
            schema = FunctionSchema(
                name=tool["name"],
                description=tool["description"],
                properties=dict(parameters.get("properties") or {}),
                required=list(parameters.get("required") or []),
            )
            timeout = float(
                (tool.get("config") or {}).get("timeout_seconds") or DEFAULT_TIMEOUT_SECONDS
            )
            out.append((schema, self._handler(tool), timeout + WAIT_SLACK_SECONDS))
        return out

    # --- the record ---------------------------------------------------------------------------

    def _begin(self, tool_id: str | None, name: str, arguments: Any) -> dict[str, Any]:
        entry = {
            "id": str(uuid.uuid4()),
            "tool_id": tool_id,
            "name": name,
            "arguments": storable(arguments) if isinstance(arguments, dict) else {},
            "result": None,
            "status": "failed",
            "at": iso(utcnow()),
            "duration_ms": 0,
        }
        self.calls.append(entry)
        return entry

    @staticmethod
    def _settle_entry(entry: dict[str, Any], started: float, result: Any) -> None:
        failed = isinstance(result, dict) and "error" in result
        entry.update(
            result=result,
            status="failed" if failed else "succeeded",
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    async def settle(self, seconds: float) -> None:
        """Wait (at most `seconds`) for tools still running, so their results are in
        the call's record."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=seconds)

    # --- the functions ------------------------------------------------------------------------

    async def end_call(self, params: FunctionCallParams) -> None:
        """The model's built-in end_call: agent_hangup, and the model is not asked again."""
        entry = self._begin(None, "end_call", params.arguments)
        result = {"status": "ending the call"}
        self._settle_entry(entry, time.monotonic(), result)
        await self.leave("agent_hangup")
        await params.result_callback(result, properties=FunctionCallResultProperties(run_llm=False))
        await params.llm.push_frame(EndWorkerFrame(), FrameDirection.UPSTREAM)

    def _handler(self, tool: dict[str, Any]) -> FunctionCallHandler:
        async def handle(params: FunctionCallParams) -> None:
            task = asyncio.create_task(self._call(tool, params))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            # The model's wait may be cancelled (the contact hung up): the tool runs on.
            await asyncio.shield(task)

        return handle

    async def _call(self, tool: dict[str, Any], params: FunctionCallParams) -> None:
        entry = self._begin(tool["id"], tool["name"], params.arguments)
        started = time.monotonic()
        arguments = entry["arguments"]
        try:
            if tool["type"] == "http":
                result = await self._http(tool, entry["id"], arguments)
            elif tool["type"] == "transfer_call":
                result = await self._transfer(tool)
            elif tool["type"] == "check_availability":
                result = await self._check_availability(tool, arguments)
            elif tool["type"] == "book_appointment":
                result = await self._book_appointment(tool, arguments)
            else:
                result = await self._send_sms(arguments)
        except Exception:  # a tool's failure is the model's to hear, never the call's end
            log.exception("call %s: tool %s failed", self.facts.call_id, tool["name"])
            result = {"error": "internal_error"}
        # The model hears what is stored (CONTRACT 18a): no NUL, lone surrogate or NaN.
        result = storable(result)
        self._settle_entry(entry, started, result)
        transferred = tool["type"] == "transfer_call" and "error" not in result
        with contextlib.suppress(Exception):  # the call may be over already
            await params.result_callback(
                result, properties=FunctionCallResultProperties(run_llm=not transferred)
            )
            if transferred:
                await params.llm.push_frame(EndWorkerFrame(), FrameDirection.UPSTREAM)

    async def _http(self, tool: dict[str, Any], entry_id: str, arguments: dict[str, Any]) -> Any:
        config = tool.get("config") or {}
        facts = self.facts
        body = json.dumps(
            {
                "tool_call_id": entry_id,
                "call_id": str(facts.call_id),
                "agent_id": str(facts.agent_id),
                "contact_id": str(facts.contact_id),
                "tool": tool["name"],
                "arguments": arguments,
            }
        )
        answer = await post_for_answer(
            config["url"],
            tool["secret"],
            entry_id,
            body,
            allow_private=self.settings.allow_private_webhooks,
            headers=dict(config.get("headers") or {}),
            timeout_seconds=float(config.get("timeout_seconds") or DEFAULT_TIMEOUT_SECONDS),
            limit=RESULT_LIMIT,
        )
        if answer.error is not None:
            return {"error": answer.error}
        assert answer.status_code is not None
        if not 200 <= answer.status_code < 300:
            return {"error": f"the tool answered HTTP {answer.status_code}"}
        text = answer.body.decode("utf-8", errors="replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    async def _transfer(self, tool: dict[str, Any]) -> dict[str, Any]:
        config = tool.get("config") or {}
        number = str(config["phone_number"])
        if config.get("message"):
            await self.say(str(config["message"]))
        if self.facts.provider_call_id is None:
            return {"error": "the call cannot be transferred"}
        providers = Providers(self.settings.telephony)
        try:
            await providers.get(self.facts.provider).transfer_call(
                self.facts.provider_call_id, number
            )
        except (TelephonyError, ValueError) as exc:
            return {"error": f"transfer_failed: {exc}"[:500]}
        finally:
            await providers.aclose()
        self.transferred_to = number
        await self.leave("transferred")
        return {"status": "transferred", "phone_number": number}

    async def _send_sms(self, arguments: dict[str, Any]) -> dict[str, Any]:
        content = arguments.get("content")
        if not isinstance(content, str) or not content.strip():
            return {"error": "validation_error: content must be a non-empty string"}
        if len(content) > MAX_SMS:
            return {"error": "content_too_long"}
        scope = self.facts.scope
        organisation_id = await scope.pool.fetchval(SELECT_ORGANISATION, scope.sub_account_id)
        try:
            message = await send_to_contact(
                scope, organisation_id, self.facts.contact_id, Outgoing("sms", content, None)
            )
        except APIError as exc:
            return {"error": exc.code}
        return {"message_id": str(message["id"])}

    async def _check_availability(
        self, tool: dict[str, Any], arguments: dict[str, Any]
    ) -> dict[str, Any]:
        raw = arguments.get("date")
        from_day: date | None = None
        if raw is not None and raw != "":
            if not isinstance(raw, str):
                return {"error": "validation_error: date must be YYYY-MM-DD"}
            try:
                from_day = date.fromisoformat(raw.strip())
            except ValueError:
                return {"error": "validation_error: date must be YYYY-MM-DD"}
        calendar_id = uuid.UUID(str((tool.get("config") or {})["calendar_id"]))
        try:
            calendar, found = await next_free_slots(
                self.facts.scope,
                calendar_id,
                from_day=from_day,
                now=utcnow() + OFFER_MARGIN,
                limit=SLOT_LIMIT,
            )
        except APIError as exc:
            return {"error": exc.code}
        zone = ZoneInfo(calendar["timezone"])
        slots = []
        for slot in found:
            shown = slot_out(slot, zone)
            slots.append({"start": shown["start"], "start_local": shown["start_local"]})
        return {"slots": slots}

    async def _book_appointment(
        self, tool: dict[str, Any], arguments: dict[str, Any]
    ) -> dict[str, Any]:
        raw = arguments.get("start")
        if not isinstance(raw, str) or not raw.strip():
            return {"error": "validation_error: start must be an ISO 8601 date-time"}
        calendar_id = uuid.UUID(str((tool.get("config") or {})["calendar_id"]))
        try:
            start = parse_start(raw)
            appointment = await book(
                self.facts.scope,
                calendar_id,
                self.facts.contact_id,
                start,
                source="agent",
                call_id=self.facts.call_id,
            )
        except APIError as exc:
            if exc.code == "slot_unavailable":
                return {"error": "slot_unavailable"}
            return {"error": exc.code}
        return {
            "appointment_id": str(appointment["id"]),
            "start": iso(appointment["start"]),
            "end": iso(appointment["end"]),
        }
