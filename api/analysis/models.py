"""Asking the agent's own model for a call's analysis, in its vendor's wire format, over plain
HTTP (the worker runs no Pipecat): one request per analysis whose structured output holds the
summary, `success` and the data (CONTRACT 10 "Analysis").

- OpenAI-format vendors (OpenAI, DeepSeek, Grok): `response_format` `{type: json_schema,
  json_schema: {name, schema, strict: true}}`; the answer is the message's JSON text.
- Anthropic: a forced tool (`tools` + `tool_choice: {type: tool, name}`); the answer is the
  tool_use input.
- Gemini: `generationConfig.responseMimeType: application/json` + `responseSchema` (its OpenAPI
  subset: upper-case types, `nullable`, enums of strings only); the answer is the JSON text.

The schema asked for is strict in OpenAI's sense (every object closed, every property required,
an optional data property nullable), so one schema serves every vendor.

The answer is taken as it can be stored (CONTRACT 18a): cleaned (`tenancy.storable`), and each
data property the model gave a value not of its type (or not in its enum) left out (null) and
named in `Answer.left_out`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from tenancy.storable import storable

# What one request may take (the vendor is slow under load; the run's lease is longer).
TIMEOUT = httpx.Timeout(60.0, connect=5.0)
SCHEMA_NAME = "call_analysis"
MAX_SUMMARY = 1_000
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_MAX_TOKENS = 2_048
# Anthropic's own dashed API names of the SPEC's Claude ids (CONTRACT 9), as voice/vendors.py
# asks for them (the API layer cannot import the voice runtime).
ANTHROPIC_NAMES = {
    "claude-opus-4.5": "claude-opus-4-5",
    "claude-opus-4": "claude-opus-4-0",
    "claude-sonnet-4": "claude-sonnet-4-0",
    "claude-3.5-sonnet": "claude-3-5-sonnet-latest",
    "claude-3.5-haiku": "claude-3-5-haiku-latest",
    "claude-3-opus": "claude-3-opus-latest",
    "claude-3-haiku": "claude-3-haiku-20240307",
}
INSTRUCTIONS = (
    "You analyse a finished phone call between an AI agent and a contact. Read the transcript "
    "and answer only with the requested structure."
)


class VendorFailed(Exception):
    """The vendor did not answer with an analysis (worth another try); the message says why."""


@dataclass(frozen=True)
class Ask:
    """One analysis request: the agent's vendor and model, the sub-account's key, the base URL
    of the settings, and what to ask for."""

    vendor: str
    model: str
    key: str
    base_url: str
    summary: bool
    success_criteria: str | None
    data_schema: dict[str, Any] | None


@dataclass(frozen=True)
class Answer:
    summary: str | None
    data: dict[str, Any] | None
    success: bool | None
    # Why each data value the model gave was left out, naming its property.
    left_out: tuple[str, ...] = ()


# --- what is asked ----------------------------------------------------------------------------


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    out = {**prop, "type": [prop["type"], "null"]}
    if "enum" in prop:
        out["enum"] = [*prop["enum"], None]
    return out


def strict_data_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The agent's data_schema as strict structured output takes it: closed, every property
    required, the optional ones nullable."""
    required = set(schema.get("required") or [])
    properties = {
        name: (dict(prop) if name in required else _nullable(prop))
        for name, prop in (schema.get("properties") or {}).items()
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def answer_schema(ask: Ask) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if ask.summary:
        properties["summary"] = {
            "type": "string",
            "description": f"What happened on the call, in at most {MAX_SUMMARY} characters.",
        }
    if ask.success_criteria:
        properties["success"] = {
            "type": "boolean",
            "description": "Whether the call met the success criteria: " + ask.success_criteria,
        }
    if ask.data_schema is not None:
        properties["data"] = {
            **strict_data_schema(ask.data_schema),
            "description": "The data the transcript gives.",
        }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema of ours in Gemini's OpenAPI subset."""
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    kind = next(k for k in kinds if k != "null")
    out: dict[str, Any] = {"type": kind.upper()}
    if "null" in kinds:
        out["nullable"] = True
    if "description" in schema:
        out["description"] = schema["description"]
    enum = [value for value in schema.get("enum") or [] if value is not None]
    if enum and kind == "string":
        out["enum"] = enum
    if kind == "object":
        out["properties"] = {
            name: gemini_schema(prop) for name, prop in schema["properties"].items()
        }
        out["required"] = list(schema.get("required") or [])
        if out["properties"]:
            out["propertyOrdering"] = list(out["properties"])
    return out


def instructions(ask: Ask) -> str:
    lines = [INSTRUCTIONS]
    if ask.summary:
        lines.append(f"summary: what happened, in at most {MAX_SUMMARY} characters.")
    if ask.success_criteria:
        lines.append("success: true only if the call met these criteria: " + ask.success_criteria)
    if ask.data_schema is not None:
        lines.append("data: each property as the transcript gives it (null when it does not).")
    return "\n".join(lines)


def transcript_text(messages: list[dict[str, Any]]) -> str:
    names = {"agent": "Agent", "contact": "Contact"}
    return "\n".join(
        f"{names.get(m.get('role', ''), 'Agent')}: {m.get('text', '')}" for m in messages
    )


def request_of(ask: Ask, transcript: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(url, headers, JSON body) of the analysis request in the vendor's wire format."""
    schema = answer_schema(ask)
    system = instructions(ask)
    user = "Transcript of the call:\n\n" + transcript
    if ask.vendor == "anthropic":
        return (
            f"{ask.base_url}/v1/messages",
            {"x-api-key": ask.key, "anthropic-version": ANTHROPIC_VERSION},
            {
                "model": ANTHROPIC_NAMES.get(ask.model, ask.model),
                "max_tokens": ANTHROPIC_MAX_TOKENS,
                "temperature": 0,
                "system": system,
                "messages": [{"role": "user", "content": user}],
                "tools": [
                    {
                        "name": SCHEMA_NAME,
                        "description": "Record the call's analysis.",
                        "input_schema": schema,
                    }
                ],
                "tool_choice": {"type": "tool", "name": SCHEMA_NAME},
            },
        )
    if ask.vendor == "google":
        return (
            f"{ask.base_url}/v1beta/models/{ask.model}:generateContent",
            {"x-goog-api-key": ask.key},
            {
                "systemInstruction": {"parts": [{"text": system}]},
                "contents": [{"role": "user", "parts": [{"text": user}]}],
                "generationConfig": {
                    "temperature": 0,
                    "responseMimeType": "application/json",
                    "responseSchema": gemini_schema(schema),
                },
            },
        )
    return (
        f"{ask.base_url}/chat/completions",
        {"authorization": f"Bearer {ask.key}"},
        {
            "model": ask.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True},
            },
        },
    )


# --- what is answered -------------------------------------------------------------------------


def _structured(vendor: str, body: Any) -> Any:
    """The structured output in the vendor's answer (KeyError, ValueError... when it has none)."""
    if vendor == "anthropic":
        return next(
            block["input"]
            for block in body["content"]
            if block.get("type") == "tool_use" and block.get("name") == SCHEMA_NAME
        )
    if vendor == "google":
        parts = body["candidates"][0]["content"]["parts"]
        return json.loads("".join(part.get("text", "") for part in parts))
    return json.loads(body["choices"][0]["message"]["content"])


def _misfit(prop: dict[str, Any], value: Any) -> str | None:
    """Why `value` does not fit the data_schema property `prop` (one of string, number,
    integer, boolean, maybe with an enum); None when it does."""
    kind = prop.get("type")
    fits = {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
    }.get(str(kind), True)
    if not fits:
        return f"not of type {kind} (the model gave {_json_type(value)})"
    if "enum" in prop and value not in prop["enum"]:
        return "not one of its enum values"
    return None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def fitted_data(
    schema: dict[str, Any], given: dict[str, Any]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Each property of the data_schema with the value the model gave it, or null when it gave
    none or one that does not fit (a whole number given to an integer property fits); and why
    each value was left out, naming its property."""
    data: dict[str, Any] = {}
    left_out: list[str] = []
    for name, prop in (schema.get("properties") or {}).items():
        value = given.get(name)
        if prop.get("type") == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        misfit = None if value is None else _misfit(prop, value)
        if misfit is not None:
            left_out.append(f"data.{name} was left out: {misfit}")
            value = None
        data[name] = value
    return data, tuple(left_out)


def answer_of(ask: Ask, structured: Any) -> Answer:
    structured = storable(structured)
    if not isinstance(structured, dict):
        raise VendorFailed(f"llm_error: {ask.vendor} answered no analysis object")
    summary = structured.get("summary") if ask.summary else None
    success = structured.get("success") if ask.success_criteria else None
    data = None
    left_out: tuple[str, ...] = ()
    if ask.data_schema is not None:
        given = structured.get("data")
        data, left_out = fitted_data(ask.data_schema, given if isinstance(given, dict) else {})
    return Answer(
        summary[:MAX_SUMMARY] if isinstance(summary, str) else None,
        data,
        success if isinstance(success, bool) else None,
        left_out,
    )


async def analyse(ask: Ask, transcript: str, client: httpx.AsyncClient | None = None) -> Answer:
    """The model's analysis of `transcript`; VendorFailed when it gives none."""
    url, headers, body = request_of(ask, transcript)
    try:
        if client is None:
            async with httpx.AsyncClient(timeout=TIMEOUT) as own:
                response = await own.post(url, headers=headers, json=body)
        else:
            response = await client.post(url, headers=headers, json=body)
    except httpx.HTTPError as exc:
        raise VendorFailed(
            f"llm_error: {ask.vendor} did not answer ({type(exc).__name__})"
        ) from exc
    if response.status_code // 100 != 2:
        raise VendorFailed(f"llm_error: {ask.vendor} answered {response.status_code}")
    try:
        structured = _structured(ask.vendor, response.json())
    except (ValueError, KeyError, IndexError, TypeError, StopIteration) as exc:
        raise VendorFailed(f"llm_error: {ask.vendor}'s answer held no analysis") from exc
    return answer_of(ask, structured)
