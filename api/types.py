"""Field types and small parsers shared by every feature's request models."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

import email_validator
from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AfterValidator,
    BeforeValidator,
    GetJsonSchemaHandler,
    PlainSerializer,
    StrictInt,
    StrictStr,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from integrations.email import has_control_characters, has_encoded_word
from tenancy.errors import APIError


class Documented:
    """Annotated metadata that adds keywords to a field's JSON schema (the OpenAPI document):
    the rules a validator or the service checks that pydantic cannot describe by itself."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(self, core: Any, handler: GetJsonSchemaHandler) -> Any:
        schema = handler(core)
        schema.update(self.keywords)
        return schema


def _class_of(characters: list[str]) -> str:
    return "".join(f"\\u{ord(character):04x}" for character in characters)


# What str.strip() strips, spelled out: "\S" differs between regex engines (Rust's and
# ECMAScript's leave U+001C..U+001F out of "\s", Python's does not).
WHITESPACE = [chr(point) for point in range(0x3001) if chr(point).isspace()]
NON_BLANK_PATTERN = f"[^{_class_of(WHITESPACE)}]"
NON_BLANK: dict[str, Any] = {"minLength": 1, "pattern": NON_BLANK_PATTERN}


def any_case(word: str) -> str:
    """A pattern matching `word` in any letter case (`word` holds no regex metacharacters)."""
    return "".join(
        f"[{letter.lower()}{letter.upper()}]" if letter.isalpha() else letter for letter in word
    )


# An address email-validator accepts (no deliverability check): the format, and not under a
# special-use domain such as .test or .local.
EMAIL_KEYWORDS: dict[str, Any] = {
    "format": "email",
    "not": {
        "pattern": "@(?:.*\\.)?(?:"
        + "|".join(any_case(name) for name in email_validator.SPECIAL_USE_DOMAIN_NAMES)
        + ")\\.?$"
    },
}
E164_PATTERN = r"^\+[1-9][0-9]{1,14}$"


def _no_str_or_bool(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("must be a JSON number")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


# Free-form JSON numbers go to jsonb: finite, and small enough to be a plain int or float.
# (Judged by the exponent alone: arithmetic on 1e999999999 would overflow the context.)
MAX_JSON_DIGITS = 15


def _json_number(value: Decimal) -> int | float:
    if not value.is_finite():
        raise ValueError("numbers must be finite")
    if value.is_zero():
        return 0
    if value.adjusted() >= MAX_JSON_DIGITS:
        raise ValueError(f"numbers must be below 1e{MAX_JSON_DIGITS} in magnitude")
    return int(value) if value == value.to_integral_value() else float(value)


def _plain_json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return _json_number(value)
    if isinstance(value, dict):
        return {key: _plain_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_json(item) for item in value]
    return value


def _storable_json(value: Any) -> Any:
    try:
        return _plain_json(value)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _to_money(value: Any) -> Decimal:
    _no_str_or_bool(value)
    try:
        amount = Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError("must be a number") from exc
    if not amount.is_finite():
        raise ValueError("must be a finite number")
    return amount


def _no_control_characters(value: str) -> str:
    if has_control_characters(value):
        raise ValueError("must not contain control characters (line breaks, tabs and the like)")
    return value


def _header_text(value: str) -> str:
    _no_control_characters(value)
    if has_encoded_word(value):
        raise ValueError("must not contain an RFC 2047 encoded word (=?...?=)")
    return value


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _whole(value: Any) -> Any:
    # Request bodies parse JSON fractions as Decimal (exact money); other callers pass floats.
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _NumberOnly:
    """A Decimal is documented as a JSON number only (pydantic would also offer a string)."""

    def __get_pydantic_json_schema__(self, core: Any, handler: GetJsonSchemaHandler) -> Any:
        schema = handler(core)
        numbers = [option for option in schema.get("anyOf", []) if option.get("type") == "number"]
        if numbers:
            rest = {key: value for key, value in schema.items() if key != "anyOf"}
            schema = {**rest, **numbers[0]}
        return schema


# A JSON number (never a string or boolean), exact as sent.
Money = Annotated[
    Decimal,
    _NumberOnly(),
    BeforeValidator(_to_money),
    PlainSerializer(float, return_type=float, when_used="json"),
]
Number = Annotated[float, BeforeValidator(_no_str_or_bool), AfterValidator(_finite)]
# An integer: JSON has one number type, and 3.0 is the integer 3 (JSON Schema's `integer`
# says so too); 3.5, strings and booleans are refused.
WholeNumber = Annotated[StrictInt, BeforeValidator(_whole)]
# A free-form JSON object (plan features, settings) as it will be stored in jsonb.
JSONObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]
NonBlank = Annotated[str, AfterValidator(_non_blank), Documented(**NON_BLANK)]
# Text that reaches an email header or a URL we send out (subjects, names, locationID, plan
# names): one line, no control characters, and no RFC 2047 encoded word (`=?...?=`, harmless or
# not: a reader decodes `=?utf-8?q?=0D=0A?=` into a line break), so no client can add a header,
# end the headers or split a request (CONTRACT 8, 11, 11a).
HEADER_TEXT_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$"
ENCODED_WORD_PATTERN = "=\\?[\\s\\S]*\\?="
HeaderText = Annotated[
    StrictStr,
    AfterValidator(_header_text),
    Documented(pattern=HEADER_TEXT_PATTERN, **{"not": {"pattern": ENCODED_WORD_PATTERN}}),
]


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    options = [option for option in schema.get("anyOf", []) if option.get("type") != "null"]
    if not options:
        return schema
    kept = {key: value for key, value in schema.items() if key not in ("anyOf", "default")}
    return {**kept, **options[0]} if len(options) == 1 else {**kept, "anyOf": options}


def _merged(schema: dict[str, Any], keywords: dict[str, Any]) -> dict[str, Any]:
    merged = dict(schema)
    for key, value in keywords.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def document(
    *,
    required: tuple[str, ...] = (),
    not_null: tuple[str, ...] = (),
    properties: dict[str, dict[str, Any]] | None = None,
    any_of: list[dict[str, Any]] | None = None,
    all_of: list[dict[str, Any]] | None = None,
    refuse: dict[str, Any] | None = None,
) -> Callable[[dict[str, Any]], None]:
    """A model's `json_schema_extra`: the rules its route or service checks beyond the fields'
    types, so that the document says exactly what is accepted. `required`: fields the route
    checks itself; `not_null`: optional fields that
    may be absent but not null; `properties`: keywords added to a field; `any_of`: the request
    needs one of these shapes (an at-least-one rule); `all_of`: conditions (if/then) it meets;
    `refuse`: a shape it must not have."""

    def apply(schema: dict[str, Any]) -> None:
        fields = schema.get("properties", {})
        if required:
            schema["required"] = [*schema.get("required", []), *required]
        for name in (*required, *not_null):
            fields[name] = _without_null(fields[name])
        for name, keywords in (properties or {}).items():
            fields[name] = _merged(fields[name], keywords)
        if any_of:
            schema["anyOf"] = any_of
        if all_of:
            schema["allOf"] = all_of
        if refuse:
            schema["not"] = refuse

    return apply


def when(field: str, values: list[Any], then: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema condition: when `field` is present with one of `values`, `then` holds."""
    return {"if": {"required": [field], "properties": {field: {"enum": values}}}, "then": then}


def required_one_of(*names: str) -> list[dict[str, Any]]:
    """At least one of these fields is present."""
    return [{"required": [name]} for name in names]


# A UUID as parse_uuid takes it, in the document.
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
UUID_KEYWORDS: dict[str, Any] = {"format": "uuid", "pattern": UUID_PATTERN}


def _uuid_in_body(value: Any) -> Any:
    # Text that is no UUID is 400 invalid_uuid (tenancy.errors.UUID_ERRORS); another JSON
    # type is StrictStr's to refuse (400 validation_error, as for any field of the wrong type).
    if isinstance(value, str) and not UUID_TEXT.fullmatch(value):
        raise PydanticCustomError("uuid_parsing", "Input should be a valid UUID")
    return value


# An id in a request body, kept as its text (the handler parses it with parse_uuid).
UUIDText = Annotated[StrictStr, BeforeValidator(_uuid_in_body), Documented(**UUID_KEYWORDS)]


def _uuid_text(value: Any) -> Any:
    if not isinstance(value, str) or not UUID_TEXT.fullmatch(value):
        raise ValueError("must be a UUID")
    return value


def _one_or_many(value: Any) -> Any:
    # quart-schema gives a query parameter sent once as a string, repeated as a list.
    return [value] if isinstance(value, str) else value


UUID_TEXT = re.compile(UUID_PATTERN)
# A UUID in a query string filter (a malformed one is 400 validation_error).
UUIDQuery = Annotated[
    uuid.UUID, BeforeValidator(_uuid_text), WithJsonSchema({"type": "string", **UUID_KEYWORDS})
]
# A query parameter that may be repeated (`?tag=a&tag=b`).
Repeated = BeforeValidator(_one_or_many)


def parse_uuid(value: Any, field: str = "id") -> uuid.UUID:
    """An id from a path or body; anything but a UUID string is 400 invalid_uuid."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str) and len(value) == 36:
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise APIError(400, "invalid_uuid", f"{field} must be a UUID")


# Plain ASCII addresses that email-validator certainly accepts, unchanged but for case: a
# dot-atom local part of common characters and a hostname of letter/digit/hyphen labels under
# an alphabetic top-level domain. Such an address skips the library (about 30 us a call); every
# other address, and these same ones too when a label has "--" or the domain is special-use,
# goes through it. tests/contacts/test_email_fast_path.py checks both agree.
PLAIN_EMAIL = re.compile(
    r"[A-Za-z0-9_+-]{1,64}(?:\.[A-Za-z0-9_+-]{1,64})*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,63}"
)


def _plain_email(address: str) -> str | None:
    if len(address) > 254 or not PLAIN_EMAIL.fullmatch(address):
        return None
    local, _, domain = address.lower().partition("@")
    if (
        len(local) > 64
        or "--" in domain
        or any(
            domain == name or domain.endswith("." + name)
            for name in email_validator.SPECIAL_USE_DOMAIN_NAMES
        )
    ):
        return None
    return f"{local}@{domain}"


def normalise_email(value: str) -> str | None:
    """A syntactically valid address, lowercased; None when it is not one. Spaces around it
    are forgiven; a line break or other control character is not (the document says so)."""
    address = value.strip(" ")
    plain = _plain_email(address)
    if plain is not None:
        return plain
    try:
        result = validate_email(address, check_deliverability=False)
    except EmailNotValidError:
        return None
    return result.normalized.lower()


def pagination(args: Any, *, default: int = 50, maximum: int = 100) -> tuple[int, int]:
    """The general list rule: limit 1..maximum (default 50), offset >= 0; otherwise 400."""
    limit = _int_arg(args.get("limit"), "limit", default)
    if not 1 <= limit <= maximum:
        raise APIError(
            400,
            "validation_error",
            f"limit must be between 1 and {maximum}",
            details=[{"field": "limit", "message": f"must be 1 to {maximum}", "type": "range"}],
        )
    return limit, offset_arg(args)


def page_fields(key: str, items: list[Any], total: int, limit: int, offset: int) -> dict[str, Any]:
    """A page under `key`, and where it sits in the whole (total, limit, offset, has_more)."""
    return {
        key: items,
        "total": total,
        "limit": limit,
        "offset": offset,
        "has_more": offset + len(items) < total,
    }


def page_body(key: str, items: list[Any], total: int, limit: int, offset: int) -> dict[str, Any]:
    """The general list envelope of /webhooks/inbound: status, then the page."""
    return {"status": "success", **page_fields(key, items, total, limit, offset)}


def offset_arg(args: Any) -> int:
    """The offset of every list that pages: 0 to INT_ARG_MAX (default 0); otherwise 400."""
    offset = _int_arg(args.get("offset"), "offset", 0)
    if not 0 <= offset <= INT_ARG_MAX:
        raise APIError(
            400,
            "validation_error",
            f"offset must be 0 to {INT_ARG_MAX}",
            details=[
                {"field": "offset", "message": f"must be 0 to {INT_ARG_MAX}", "type": "range"}
            ],
        )
    return offset


# Plain ASCII decimal integers that fit a PostgreSQL bigint (int() would also take "1_0", " 5"
# and non-ASCII digits, and an OFFSET past bigint fails in the database).
INT_ARG = re.compile(r"^[+-]?[0-9]{1,18}$")
INT_ARG_MAX = 10**18 - 1


def _int_arg(raw: str | None, name: str, default: int) -> int:
    # Absent is the default; present but empty (`?offset=`) is not a number, so it is 400.
    if raw is None:
        return default
    if not INT_ARG.fullmatch(raw):
        raise APIError(
            400,
            "validation_error",
            f"{name} must be an integer",
            details=[{"field": name, "message": "must be an integer", "type": "int_parsing"}],
        )
    return int(raw)


def _unstorable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate, which JSON allows and UTF-8 does not
        return True
    return False


def unstorable_text_field(value: Any, root: str = "body") -> str | None:
    """Where the first string sits that PostgreSQL cannot store (NUL, unpaired surrogate)."""
    stack: list[tuple[Any, str]] = [(value, root)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _unstorable(item):
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and _unstorable(key):
                    return path
                stack.append((child, key if path == root else f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{path}.{index}") for index, child in enumerate(item))
    return None


def refuse_unstorable_text(value: Any, root: str = "body") -> None:
    """400 validation_error for text no column could hold, before any handler sees it."""
    field = unstorable_text_field(value, root)
    if field is not None:
        message = "text must not contain NUL characters or unpaired surrogates"
        raise APIError(
            400,
            "validation_error",
            message,
            details=[{"field": field, "message": message, "type": "string_unicode"}],
        )
