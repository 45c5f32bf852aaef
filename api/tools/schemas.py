"""Request and response models of the tool operations, and the bounded JSON Schema object that
an http tool's parameters and an agent's analysis data_schema share (CONTRACT 10)."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from api.schemas import Page
from api.types import (
    E164_PATTERN,
    Documented,
    NonBlank,
    WholeNumber,
    any_case,
    document,
    required_one_of,
    when,
)
from integrations.webhooks import USERINFO_PATTERN

# --- the bounded JSON Schema object ---------------------------------------------------------------

MAX_PROPERTIES = 20
MAX_ENUM = 50
MAX_ENUM_TEXT = 200
MAX_PROPERTY_DESCRIPTION = 1_000
# Property names as every model vendor's function calling and structured output take them.
PROPERTY_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$"
PropertyName = Annotated[str, StringConstraints(pattern=PROPERTY_NAME)]
PROPERTY_TYPES = ("string", "number", "integer", "boolean")
MAX_JSON_DIGITS = 15


def _enum_value(value: Any) -> Any:
    """A JSON scalar as stored: text of at most MAX_ENUM_TEXT characters, a boolean, or a
    finite number below 1e15 (a whole one as an integer)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > MAX_ENUM_TEXT:
            raise ValueError(f"enum text has at most {MAX_ENUM_TEXT} characters")
        return value
    if isinstance(value, int):
        if abs(value) >= 10**MAX_JSON_DIGITS:
            raise ValueError(f"enum numbers must be below 1e{MAX_JSON_DIGITS} in magnitude")
        return value
    if isinstance(value, float | Decimal):
        number = Decimal(str(value)) if isinstance(value, float) else value
        if not number.is_finite() or (
            not number.is_zero() and number.adjusted() >= MAX_JSON_DIGITS
        ):
            raise ValueError(f"enum numbers must be finite and below 1e{MAX_JSON_DIGITS}")
        return int(number) if number == number.to_integral_value() else float(number)
    raise ValueError("enum values are strings, numbers or booleans")


ENUM_ITEM = {
    "anyOf": [
        {"type": "string", "maxLength": MAX_ENUM_TEXT},
        {"type": "boolean"},
        {
            "type": "number",
            "exclusiveMinimum": -(10**MAX_JSON_DIGITS),
            "exclusiveMaximum": 10**MAX_JSON_DIGITS,
        },
    ]
}
EnumValue = Annotated[Any, AfterValidator(_enum_value), WithJsonSchema(ENUM_ITEM)]


def _matches(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool)


def _enum_of(kind: str) -> dict[str, Any]:
    item = {
        "string": {"type": "string"},
        "boolean": {"type": "boolean"},
        "integer": {"type": "integer"},
        "number": {"type": "number"},
    }[kind]
    return when("type", [kind], {"properties": {"enum": {"items": item}}})


class ParameterProperty(BaseModel):
    """One property: its type, and optionally the values it may take and what it means."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=document(all_of=[_enum_of(kind) for kind in PROPERTY_TYPES]),
    )

    type: Literal["string", "number", "integer", "boolean"]
    enum: (
        Annotated[
            list[EnumValue], Field(min_length=1, max_length=MAX_ENUM), Documented(uniqueItems=True)
        ]
        | None
    ) = None
    description: Annotated[StrictStr, Field(max_length=MAX_PROPERTY_DESCRIPTION)] | None = None

    @model_validator(mode="after")
    def _enum_fits_type(self) -> ParameterProperty:
        if self.enum is not None:
            if not all(_matches(self.type, value) for value in self.enum):
                raise ValueError(f"every enum value must be of type {self.type}")
            if len({(type(value), value) for value in self.enum}) != len(self.enum):
                raise ValueError("enum values must be distinct")
        return self


class JSONSchemaObject(BaseModel):
    """A JSON Schema object a model fills in: `type: object`, at most 20 properties (string,
    number, integer or boolean, each with an optional enum and description), and `required`,
    names of those properties."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["object"]
    properties: Annotated[
        dict[PropertyName, ParameterProperty],
        Field(max_length=MAX_PROPERTIES),
        Documented(propertyNames={"pattern": PROPERTY_NAME}),
    ] = Field(default_factory=dict)
    required: Annotated[
        list[PropertyName], Field(max_length=MAX_PROPERTIES), Documented(uniqueItems=True)
    ] = Field(default_factory=list)

    @model_validator(mode="after")
    def _required_are_properties(self) -> JSONSchemaObject:
        unknown = [name for name in self.required if name not in self.properties]
        if unknown:
            raise ValueError(f"required names properties it does not have: {', '.join(unknown)}")
        if len(set(self.required)) != len(self.required):
            raise ValueError("required names each property once")
        return self

    def stored(self) -> dict[str, Any]:
        """As kept and shown: absent enum and description left out."""
        return self.model_dump(exclude_none=True)


# --- tools --------------------------------------------------------------------------------------

TOOL_NAME = r"^[a-zA-Z][a-zA-Z0-9_]{0,63}$"
# The built-in tool every agent's model is offered (CONTRACT 9), reserved in any case (18a).
RESERVED_TOOL_NAMES = ("end_call",)
MAX_DESCRIPTION = 1_000
MAX_HEADERS = 10
MAX_HEADER_VALUE = 2_000
MAX_TRANSFER_MESSAGE = 500
# What an http tool's header value reads back as; in a PATCH, "keep the stored value".
MASKED = "***"
# Header names (RFC 9110 tokens) and values: printable ASCII and spaces, one line.
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$"
HEADER_VALUE = rf"^[\x20-\x7e]{{1,{MAX_HEADER_VALUE}}}$"
# Headers the request itself sets (framing, the signature): a tool's headers cannot replace them.
RESERVED_HEADERS = (
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
)
# The types a tool may have; check_availability and book_appointment work on a calendar.
CALENDAR_TOOL_TYPES = ("check_availability", "book_appointment")
TOOL_TYPES = ("http", "transfer_call", "send_sms", *CALENDAR_TOOL_TYPES)


RESERVED_HEADER_PATTERN = "^(?:" + "|".join(map(any_case, RESERVED_HEADERS)) + ")$"


def _not_reserved_name(value: str) -> str:
    if value.lower() in RESERVED_TOOL_NAMES:
        raise ValueError(f"{value} is the built-in tool's name (names ignore case)")
    return value


def _headers(value: dict[str, str]) -> dict[str, str]:
    seen: set[str] = set()
    for name in value:
        folded = name.lower()
        if folded in RESERVED_HEADERS:
            raise ValueError(f"{name} is set by the request itself")
        if folded in seen:
            raise ValueError(f"{name} is named twice (header names ignore case)")
        seen.add(folded)
    return value


ToolName = Annotated[
    StrictStr,
    Field(pattern=TOOL_NAME),
    AfterValidator(_not_reserved_name),
    Documented(
        **{"not": {"pattern": "^(?:" + "|".join(map(any_case, RESERVED_TOOL_NAMES)) + ")$"}}
    ),
]
Description = Annotated[NonBlank, Field(max_length=MAX_DESCRIPTION)]
HeaderName = Annotated[str, StringConstraints(pattern=HEADER_NAME)]
HeaderValue = Annotated[StrictStr, StringConstraints(pattern=HEADER_VALUE)]
HEADERS_SCHEMA = {
    "type": "object",
    "maxProperties": MAX_HEADERS,
    "propertyNames": {"pattern": HEADER_NAME, "not": {"pattern": RESERVED_HEADER_PATTERN}},
    "additionalProperties": {"type": "string", "pattern": HEADER_VALUE},
    "description": "Sent with every request; values are stored encrypted and "
    f"read back as {MASKED!r}. Names ignore case.",
}
Headers = Annotated[
    dict[HeaderName, HeaderValue],
    Field(max_length=MAX_HEADERS),
    AfterValidator(_headers),
    WithJsonSchema(HEADERS_SCHEMA),
]
HTTP_URL = {
    "format": "uri",
    "pattern": r"^[hH][tT][tT][pP][sS]?://",
    "not": {"pattern": USERINFO_PATTERN},
    "description": "An absolute http(s) URL whose host resolves to public addresses, without a "
    "user name or password.",
}


class HttpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: Annotated[StrictStr, Field(min_length=1, max_length=2048), Documented(**HTTP_URL)]
    headers: Headers = Field(default_factory=dict)
    timeout_seconds: WholeNumber = Field(default=10, ge=1, le=20)


class TransferCallConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phone_number: Annotated[StrictStr, Field(pattern=E164_PATTERN)]
    message: Annotated[NonBlank, Field(max_length=MAX_TRANSFER_MESSAGE)] | None = None


class SendSmsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CalendarConfig(BaseModel):
    """check_availability and book_appointment: a calendar of the sub-account."""

    model_config = ConfigDict(extra="forbid")

    calendar_id: uuid.UUID


CONFIG_MODELS: dict[str, type[BaseModel]] = {
    "http": HttpConfig,
    "transfer_call": TransferCallConfig,
    "send_sms": SendSmsConfig,
    "check_availability": CalendarConfig,
    "book_appointment": CalendarConfig,
}
# The model fills in only an http tool's parameters; the others' are fixed.
FIXED_PARAMETERS: dict[str, dict[str, Any]] = {
    "transfer_call": {"type": "object", "properties": {}, "required": []},
    "send_sms": {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "The text message to send to the contact."}
        },
        "required": ["content"],
    },
    "check_availability": {
        "type": "object",
        "properties": {
            "date": {
                "type": "string",
                "description": "The first day to look on, YYYY-MM-DD (default today); "
                "later days follow.",
            }
        },
        "required": [],
    },
    "book_appointment": {
        "type": "object",
        "properties": {
            "start": {
                "type": "string",
                "description": "The start of a free slot, as check_availability gave it.",
            }
        },
        "required": ["start"],
    },
}


def _config_schema(kind: str) -> dict[str, Any]:
    schema = CONFIG_MODELS[kind].model_json_schema()
    schema.pop("title", None)
    for field in schema.get("properties", {}).values():
        field.pop("title", None)
    return schema


def _per_type(kind: str) -> dict[str, Any]:
    """What a body of this type must hold: its config (send_sms has none to give), and no
    parameters where they are fixed."""
    then: dict[str, Any] = {"properties": {"config": _config_schema(kind)}}
    if kind != "send_sms":
        then["required"] = ["config"]
    if kind in FIXED_PARAMETERS:
        then["not"] = {"required": ["parameters"]}
    return when("type", [kind], then)


TYPE_DESCRIPTION = (
    "http, transfer_call, send_sms, check_availability or book_appointment. "
    "parameters: http only; config: per type."
)


class CreateToolRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            properties={"type": {"enum": list(TOOL_TYPES), "description": TYPE_DESCRIPTION}},
            all_of=[_per_type(kind) for kind in TOOL_TYPES],
        ),
    )

    name: ToolName
    type: StrictStr
    description: Description
    parameters: JSONSchemaObject = Field(default_factory=lambda: JSONSchemaObject(type="object"))
    config: dict[str, Any] = Field(default_factory=dict)


class UpdateToolRequest(BaseModel):
    """name, description and config; config is replaced whole (an http header sent as "***"
    keeps its stored value). `type` and `parameters` never change."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra=document(
            not_null=("name", "description", "config"),
            any_of=required_one_of("name", "description", "config"),
            refuse={"anyOf": [{"required": ["type"]}, {"required": ["parameters"]}]},
        ),
    )

    name: ToolName | None = None
    description: Description | None = None
    config: dict[str, Any] | None = None


class Tool(BaseModel):
    id: uuid.UUID
    name: str
    type: str
    description: str
    parameters: dict[str, Any]
    config: dict[str, Any]
    secret: str
    created_at: datetime
    updated_at: datetime


class ToolResponse(BaseModel):
    status: str
    tool: Tool


class ToolList(Page):
    tools: list[Tool]


class ToolDeleted(BaseModel):
    status: str
    deleted: bool
    tool_id: uuid.UUID
