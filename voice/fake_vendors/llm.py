"""The fake LLM: one reply rule for every vendor, rendered in OpenAI's, Anthropic's and Google's
wire formats (the rules are listed in the package docstring)."""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

END_CALL = "end_call"
END_CALL_MARKER = "[fake:end_call_on_goodbye]"
REPLY_MARKER = re.compile(r"\[fake:reply=(.*?)\]", re.DOTALL)
# `[fake:call=<name>]`, optionally ` on=<word>` and ` args=<JSON object>` before the `]`.
CALL_MARKER = re.compile(r"\[fake:call=(\w+)(?: on=(\w+))?(?: args=(\{.*?\}))?\]", re.DOTALL)
STILL_THERE = "Are you still there?"
DEFAULT_REPLY = "Great, thank you for your time."
# The reply to a tool result that is neither an error, free slots nor a booking.
AFTER_TOOL = "Done: {result}."
RESULT_CHARACTERS = 80

_ids = itertools.count(1)


@dataclass(frozen=True)
class Conversation:
    system: str
    # The text of the final message when it is the user's; None when the final message is not.
    user_turn: str | None
    after_tool_result: bool
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The tools the model already called in this conversation.
    called: frozenset[str] = frozenset()
    # Every tool result of the conversation, in order (JSON parsed where it is JSON); the final
    # message's own are the last `last_results` of them.
    results: tuple[Any, ...] = ()
    last_results: int = 0


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    # Further tool calls of the same turn, after `tool`.
    more: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def tool_calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [(self.tool, self.arguments), *self.more] if self.tool else []

    @property
    def summary(self) -> str:
        if not self.tool:
            return self.text
        return ", ".join(f"{name}({json.dumps(arguments)})" for name, arguments in self.tool_calls)


def reply_to(conversation: Conversation) -> Reply:
    if conversation.after_tool_result:
        fresh = conversation.results[len(conversation.results) - conversation.last_results :]
        return Reply(after_tools(fresh, conversation.results))
    user_turn = (conversation.user_turn or "").strip()
    if not user_turn:
        return Reply(STILL_THERE)
    if (
        END_CALL_MARKER in conversation.system
        and "goodbye" in user_turn.lower()
        and END_CALL in conversation.tools
    ):
        return Reply(tool=END_CALL, arguments=_arguments(conversation.tools[END_CALL]))
    calls = _scripted_calls(conversation, user_turn)
    if calls:
        return Reply(tool=calls[0][0], arguments=calls[0][1], more=tuple(calls[1:]))
    marker = REPLY_MARKER.search(conversation.system)
    return Reply(marker.group(1) if marker else DEFAULT_REPLY)


def _scripted_calls(conversation: Conversation, user_turn: str) -> list[tuple[str, dict[str, Any]]]:
    """The `[fake:call=...]` markers of the system prompt whose tool is offered and not called
    yet, and whose `on` word (if any) the user's turn contains: one call each, in order."""
    calls = []
    for name, word, arguments in CALL_MARKER.findall(conversation.system):
        if name not in conversation.tools or name in conversation.called:
            continue
        if word and word.lower() not in user_turn.lower():
            continue
        calls.append(
            (
                name,
                json.loads(arguments)
                if arguments
                else _arguments(conversation.tools[name], conversation.results),
            )
        )
    return calls


def _arguments(schema: dict[str, Any], results: tuple[Any, ...] = ()) -> dict[str, Any]:
    """Every required string parameter gets the value of the same name in the latest tool
    result that holds one (a booking's `start` from the slots just found), else "goodbye";
    the rest are left out."""
    properties = schema.get("properties") or {}
    out = {}
    for name in schema.get("required") or []:
        if str((properties.get(name) or {}).get("type", "")).lower() != "string":
            continue
        found = next((v for r in reversed(results) if (v := _find(r, name)) is not None), None)
        out[name] = found if isinstance(found, str) else "goodbye"
    return out


def _find(value: Any, key: str) -> Any:
    """The first value named `key` in a JSON value, depth first; None without one."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _find(item, key)
            if found is not None:
                return found
    return None


def after_tools(fresh: tuple[Any, ...], results: tuple[Any, ...]) -> str:
    """What the model says once it has its tools' results: each read out in a sentence."""
    return " ".join(_read_out(result, results) for result in fresh) or STILL_THERE


def _read_out(result: Any, results: tuple[Any, ...]) -> str:
    if isinstance(result, dict) and result.get("error"):
        return f"Sorry, that did not work: {result['error']}."
    if isinstance(result, dict) and isinstance(result.get("slots"), list):
        if not result["slots"]:
            return "I have no free time then."
        first = result["slots"][0]
        when = _when(str(first.get("start_local") or first.get("start") or ""))
        return f"The first free time is {when}. Shall I book it?"
    if isinstance(result, dict) and result.get("appointment_id"):
        start = str(result.get("start") or "")
        offered = [s for r in results if isinstance(r, dict) for s in r.get("slots") or []]
        local = next((s.get("start_local") for s in offered if s.get("start") == start), start)
        return f"You are booked for {_when(str(local))}."
    text = result if isinstance(result, str) else json.dumps(result)
    if len(text) > RESULT_CHARACTERS:
        text = text[: RESULT_CHARACTERS - 3] + "..."
    return AFTER_TOOL.format(result=text)


def _when(moment: str) -> str:
    """An ISO 8601 date-time as said on the phone ("Monday 1 December at 09:00"); as given
    when it is not one."""
    try:
        at = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return moment
    zone = " UTC" if moment.endswith("Z") else ""
    return f"{at:%A} {at.day} {at:%B} at {at:%H:%M}{zone}"


def _result(content: Any) -> Any:
    """A tool result as the vendor's request carries it, JSON parsed where it is JSON."""
    text = _text(content) if not isinstance(content, dict) else None
    if text is None:
        return content
    try:
        return json.loads(text)
    except ValueError:
        return text


def chunks(text: str) -> list[str]:
    """The reply in about three pieces, split between words."""
    words = re.findall(r"\S+\s*", text)
    size = max(1, -(-len(words) // 3))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)] or [""]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict)).strip()
    return ""


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


# --- OpenAI-compatible (OpenAI, DeepSeek, Grok) ------------------------------------------------


def from_openai(body: dict[str, Any]) -> Conversation:
    messages = body.get("messages") or []
    system = "\n".join(
        _text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    )
    last = messages[-1] if messages else {}
    tools = {
        t["function"]["name"]: t["function"].get("parameters") or {}
        for t in body.get("tools") or []
        if t.get("type") == "function"
    }
    user_turn = _text(last.get("content")) if last.get("role") == "user" else None
    called = frozenset(
        call.get("function", {}).get("name", "")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    )
    results = tuple(_result(m.get("content")) for m in messages if m.get("role") == "tool")
    trailing = len(messages) - next(
        (i + 1 for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") != "tool"), 0
    )
    return Conversation(
        system, user_turn, last.get("role") == "tool", tools, called, results, trailing
    )


def openai_stream(reply: Reply, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if reply.tool:
        for index, (name, arguments) in enumerate(reply.tool_calls):
            call = {
                "index": index,
                "id": f"call_fake{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            yield chunk({"tool_calls": [call]})
            yield chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": json.dumps(arguments)}}]}
            )
        yield chunk({}, "tool_calls")
    else:
        for piece in chunks(reply.text):
            yield chunk({"content": piece})
        yield chunk({}, "stop")
    if include_usage:
        yield {**base, "choices": [], "usage": _openai_usage(reply)}


def openai_completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool:
        message["tool_calls"] = [
            {
                "id": f"call_fake{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for name, arguments in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool else "stop",
            }
        ],
        "usage": _openai_usage(reply),
    }


def _openai_usage(reply: Reply) -> dict[str, int]:
    completion = _tokens(reply.summary)
    return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}


# --- Anthropic ---------------------------------------------------------------------------------


def from_anthropic(body: dict[str, Any]) -> Conversation:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    after_tool = any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
    tools = {t["name"]: t.get("input_schema") or {} for t in body.get("tools") or []}
    user_turn = _text(content) if last.get("role") == "user" and not after_tool else None
    called = frozenset(
        b.get("name", "")
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    results = tuple(
        _result(b.get("content"))
        for m in messages
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    fresh = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result")
    return Conversation(
        _text(body.get("system")), user_turn, after_tool, tools, called, results, fresh
    )


def anthropic_stream(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    message = _anthropic_message(reply, model)
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
    )
    if reply.tool:
        for index, block in enumerate(message["content"]):
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                },
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            if index < len(message["content"]) - 1:
                yield "content_block_stop", {"type": "content_block_stop", "index": index}
        last = len(message["content"]) - 1
        yield "content_block_stop", {"type": "content_block_stop", "index": last}
    else:
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        for piece in chunks(reply.text):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    return _anthropic_message(reply, model)


def _anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = (
        [
            {"type": "tool_use", "id": f"toolu_fake{next(_ids)}", "name": name, "input": arguments}
            for name, arguments in reply.tool_calls
        ]
        if reply.tool
        else [{"type": "text", "text": reply.text}]
    )
    return {
        "id": f"msg_fake{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": _tokens(reply.summary)},
    }


# --- Google (Gemini API) -----------------------------------------------------------------------


def from_google(body: dict[str, Any]) -> Conversation:
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    parts = last.get("parts") or []
    after_tool = any("functionResponse" in p or "function_response" in p for p in parts)
    instruction = body.get("systemInstruction") or body.get("system_instruction") or {}
    system = _text(instruction.get("parts")) if isinstance(instruction, dict) else ""
    tools: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        for f in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            tools[f["name"]] = f.get("parameters") or f.get("parametersJsonSchema") or {}
    user_turn = _text(parts) if last.get("role", "user") == "user" and not after_tool else None
    called = frozenset(
        (p.get("functionCall") or p.get("function_call") or {}).get("name", "")
        for c in contents
        if c.get("role") == "model"
        for p in c.get("parts") or []
        if "functionCall" in p or "function_call" in p
    )
    results = tuple(
        r for c in contents for p in c.get("parts") or [] if (r := _google_result(p)) is not None
    )
    fresh = sum(1 for p in parts if _google_result(p) is not None)
    return Conversation(system, user_turn, after_tool, tools, called, results, fresh)


def _google_result(part: dict[str, Any]) -> Any:
    """A functionResponse part's response (Pipecat wraps a result that is not an object as
    `{"value": ...}`); None for any other part."""
    response = (part.get("functionResponse") or part.get("function_response") or {}).get("response")
    if isinstance(response, dict) and set(response) == {"value"}:
        return _result(response["value"])
    return response


def google_stream(reply: Reply, model: str) -> Iterator[dict[str, Any]]:
    if reply.tool:
        yield google_response(reply, model)
        return
    pieces = chunks(reply.text)
    for i, piece in enumerate(pieces):
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": [{"text": piece}]},
            "index": 0,
        }
        if i == len(pieces) - 1:
            candidate["finishReason"] = "STOP"
        yield {
            "candidates": [candidate],
            "usageMetadata": _google_usage(reply),
            "modelVersion": model,
        }


def google_response(reply: Reply, model: str) -> dict[str, Any]:
    parts = (
        [
            {"functionCall": {"name": name, "args": arguments}}
            for name, arguments in reply.tool_calls
        ]
        if reply.tool
        else [{"text": reply.text}]
    )
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": _google_usage(reply),
        "modelVersion": model,
    }


def _google_usage(reply: Reply) -> dict[str, int]:
    completion = _tokens(reply.summary)
    return {
        "promptTokenCount": 10,
        "candidatesTokenCount": completion,
        "totalTokenCount": 10 + completion,
    }


# --- structured output (the worker's call analysis) -------------------------------------------
#
# A request for structured output (OpenAI-format `response_format` json_schema, Anthropic a
# forced tool `tool_choice: {type: tool}`, Gemini `generationConfig.responseSchema`) is answered
# with a value of its schema: a property whose description holds `[fake:value=<JSON>]` gets
# that JSON (of any type: a value that does not fit is how tests reach the custom-field checks),
# an enum its first value, a string the contact's first line of the transcript in the request
# ("Contact: ..."; "fake" without one), a number or integer 1, a boolean true, an object each of
# its properties (null ones included), an array [].

VALUE_MARKER = re.compile(r"\[fake:value=(.*?)\]", re.DOTALL)


def structured_value(schema: dict[str, Any], text: str) -> Any:
    marker = VALUE_MARKER.search(str(schema.get("description") or ""))
    if marker:
        return json.loads(marker.group(1))
    enum = [value for value in schema.get("enum") or [] if value is not None]
    if enum:
        return enum[0]
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    kind = str(next((k for k in kinds if str(k).lower() != "null"), "string")).lower()
    if kind == "object":
        return {
            name: structured_value(prop, text)
            for name, prop in (schema.get("properties") or {}).items()
        }
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    spoken = re.search(r"^Contact: (.+)$", text, re.MULTILINE)
    return spoken.group(1).strip() if spoken else "fake"


def _all_text(value: Any) -> str:
    """Every text of a request body, joined (the transcript is somewhere in it)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(
            _all_text(v)
            for k, v in value.items()
            if k not in ("tools", "response_format", "generationConfig")
        )
    if isinstance(value, list):
        return "\n".join(_all_text(v) for v in value)
    return ""


def structured_reply(vendor: str, body: dict[str, Any]) -> Reply | None:
    """The reply to a structured-output request (as text JSON, or Anthropic's forced tool's
    input); None for any other request."""
    text = _all_text(body.get("messages") or body.get("contents") or [])
    if vendor == "anthropic":
        choice = body.get("tool_choice") or {}
        if choice.get("type") != "tool":
            return None
        tool = next(
            (t for t in body.get("tools") or [] if t.get("name") == choice.get("name")), None
        )
        if tool is None:
            return None
        return Reply(
            tool=tool["name"], arguments=structured_value(tool.get("input_schema") or {}, text)
        )
    if vendor == "google":
        schema = (body.get("generationConfig") or {}).get("responseSchema")
    else:
        response_format = body.get("response_format") or {}
        schema = (
            (response_format.get("json_schema") or {}).get("schema")
            if (response_format.get("type") == "json_schema")
            else None
        )
    if not isinstance(schema, dict):
        return None
    return Reply(json.dumps(structured_value(schema, text)))
