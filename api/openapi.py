"""The OpenAPI document describes every answer the service gives, errors included.

quart-schema documents what each route declares; this provider adds what every route shares:
the key it takes (security), the error envelope for the generic failures (400, 401, 403, 404,
413, 429, 500, 503), the Idempotency-Key header and its 409/422 on keyed POSTs, and the
headers every answer carries.
"""

from __future__ import annotations

import re
from typing import Any

from werkzeug.routing import Rule

from api.auth import AUTH_ATTRIBUTE
from api.contacts.body import OPTIONAL_BODY_ATTRIBUTE
from api.framework import AppOpenAPIProvider, declared_response
from api.types import INT_ARG_MAX, UUID_PATTERN
from tenancy.tables.voice import PROVIDERS

ERROR_DETAIL = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
        "details": {"type": "array", "items": {"type": "object"}},
    },
}

ERROR_SCHEMAS = {
    "InboundError": {
        "type": "object",
        "required": ["status", "error"],
        "properties": {"status": {"const": "error"}, "error": ERROR_DETAIL},
    },
    "FunctionsError": {
        "type": "object",
        "required": ["success", "error"],
        "properties": {"success": {"const": False}, "error": ERROR_DETAIL},
    },
}

GENERIC = {
    400: "Invalid input",
    404: "Not found in the caller's scope",
    413: "Request body too large",
    500: "Internal error",
    503: "A backing service is unavailable",
}
KEYED = {401: "Missing or invalid API key", 403: "Outside the key's scope", 429: "Rate limited"}
KEYED_POST = {
    409: "Conflict (or the Idempotency-Key request is still running)",
    422: "Idempotency-Key reused with a different request",
}

COMMON_HEADERS = {
    "X-Request-ID": {"schema": {"type": "string"}},
    "X-API-Version": {"schema": {"type": "string"}},
}
RATE_HEADERS = {
    "RateLimit-Limit": {"schema": {"type": "integer"}},
    "RateLimit-Remaining": {"schema": {"type": "integer"}},
    "RateLimit-Reset": {"schema": {"type": "integer"}},
}

IDEMPOTENCY_PARAMETER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Replays the first answer for 24 hours for a repeat of the same request.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]{1,255}$"},
}

UUID_SCHEMA = {"type": "string", "format": "uuid", "pattern": UUID_PATTERN}
PATH_SCHEMAS = {"provider": {"type": "string", "enum": list(PROVIDERS)}}

# Lists under the general rule (api.types.pagination) take limit 1..100; these differ.
PAGE_MAXIMUM = {"conversations.get_contact_messages": 200}
# GET /contacts caps or defaults any limit instead of refusing it (CONTRACT section 2).
LENIENT_LIMIT = {"contacts.list_contacts"}
LINKED_ID = re.compile(r"^[a-z_]+_id$")
# A record named otherwise in answers than in paths.
PATH_NAME = {"phone_number_id": "number_id"}


def _page_parameters(endpoint: str) -> list[dict[str, Any]]:
    maximum = PAGE_MAXIMUM.get(endpoint, 100)
    if endpoint in LENIENT_LIMIT:
        limit: dict[str, Any] = {
            "anyOf": [{"type": "integer", "minimum": 1, "maximum": maximum}, {"type": "string"}],
            "default": 50,
        }
        limit_text = (
            f"Page size 1 to {maximum}; over {maximum} counts as {maximum}, a missing, "
            "non-numeric, zero or negative one as 50."
        )
    else:
        limit = {"type": "integer", "minimum": 1, "maximum": maximum, "default": 50}
        limit_text = f"Page size, 1 to {maximum}; anything else is 400."
    offset = {"type": "integer", "minimum": 0, "maximum": INT_ARG_MAX, "default": 0}
    return [
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "description": limit_text,
            "schema": limit,
        },
        {
            "name": "offset",
            "in": "query",
            "required": False,
            "schema": offset,
            "description": "Records to skip; a negative or non-numeric one is 400.",
        },
    ]


def _path_parameter(parameter: dict[str, Any]) -> dict[str, Any]:
    name = parameter["name"]
    if name in PATH_SCHEMAS:
        return {**parameter, "schema": PATH_SCHEMAS[name]}
    if name.endswith("_id"):
        return {**parameter, "schema": UUID_SCHEMA}
    return parameter


def _body_required(func: Any, operation: dict[str, Any], components: dict[str, Any]) -> bool:
    """A body may be left out only where an absent one reads as `{}` and `{}` is accepted."""
    if not getattr(func, OPTIONAL_BODY_ATTRIBUTE, False):
        return True
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    schema = _resolve(schema, components)
    return bool(schema.get("required") or schema.get("anyOf"))


def _paginated(func: Any) -> bool:
    declared = declared_response(func, 200)
    fields = getattr(declared, "model_fields", {}) if declared else {}
    return {"limit", "offset"} <= set(fields)


# Bounds pydantic could not fold into a number type (one with its own validators) come out
# under their Python names; JSON Schema calls them these.
BOUND_KEYWORDS = {
    "gt": "exclusiveMinimum",
    "ge": "minimum",
    "lt": "exclusiveMaximum",
    "le": "maximum",
}


def _bound(value: Any) -> Any:
    number = float(value)
    return int(number) if number.is_integer() else number


def json_schema_bounds(node: Any) -> None:
    """Rename `gt`/`ge`/`lt`/`le` (and drop `allow_inf_nan`) wherever a number schema has them."""
    if isinstance(node, list):
        for item in node:
            json_schema_bounds(item)
    elif isinstance(node, dict):
        if node.get("type") in ("number", "integer"):
            for name, keyword in BOUND_KEYWORDS.items():
                if name in node:
                    node[keyword] = _bound(node.pop(name))
            node.pop("allow_inf_nan", None)
        for value in node.values():
            json_schema_bounds(value)


# api.types.refuse_unstorable_text: no string anywhere in a request body (a key, a value, in a
# field the operation ignores too) nor in a query parameter holds NUL or an unpaired surrogate.
# The pattern states NUL; an unpaired surrogate is no Unicode text at all (a JSON Schema string
# is Unicode, and JSON exchanged between systems is UTF-8, RFC 8259 section 8.1), and regex
# engines without UTF-16 code units (Rust's, which schemathesis validates with) cannot name it.
STORABLE = r"^[^\u0000]*$"
STORABLE_JSON = {
    "anyOf": [
        {"type": "string", "pattern": STORABLE},
        {"type": ["number", "boolean", "null"]},
        {"type": "array", "items": {"$ref": "#/components/schemas/StorableJSON"}},
        {
            "type": "object",
            "propertyNames": {"pattern": STORABLE},
            "additionalProperties": {"$ref": "#/components/schemas/StorableJSON"},
        },
    ],
    "description": "Any JSON value whose strings (keys too) hold no NUL or unpaired surrogate.",
}
STORABLE_REF = {"$ref": "#/components/schemas/StorableJSON"}
NESTED = ("items", "contains", "then", "else")
NESTED_LISTS = ("anyOf", "allOf", "oneOf")


def storable(schema: Any) -> None:
    """Say in a request schema what refuse_unstorable_text refuses."""
    if not isinstance(schema, dict) or "$ref" in schema:
        return
    if schema.get("type") == "string" and "enum" not in schema and "const" not in schema:
        if "pattern" not in schema:
            schema["pattern"] = STORABLE
        elif schema["pattern"] != STORABLE:
            schema.setdefault("allOf", []).append({"pattern": STORABLE})
    if schema.get("type") == "object":
        schema.setdefault("propertyNames", {"pattern": STORABLE})
        if schema.get("additionalProperties", True) is True:
            schema["additionalProperties"] = STORABLE_REF
    for value in schema.get("properties", {}).values():
        storable(value)
    for key in NESTED:
        storable(schema.get(key))
    if isinstance(schema.get("additionalProperties"), dict):
        storable(schema["additionalProperties"])
    for key in NESTED_LISTS:
        for option in schema.get(key, []):
            storable(option)


def _request_components(document: dict[str, Any]) -> set[str]:
    """The component schemas request bodies use, directly or through each other."""
    found: set[str] = set()
    pending = [
        operation["requestBody"]
        for operations in document["paths"].values()
        for operation in operations.values()
        if "requestBody" in operation
    ]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            name = ref.rsplit("/", 1)[-1]
            if ref.startswith("#/components/schemas/") and name not in found:
                found.add(name)
                pending.append(document["components"]["schemas"][name])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return found


def document_storable_text(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    for name in _request_components(document):
        storable(components[name])
    for operations in document["paths"].values():
        for operation in operations.values():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                storable(body["schema"])
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query":
                    storable(parameter["schema"])
    components["StorableJSON"] = STORABLE_JSON


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    options = [option for option in schema.get("anyOf", []) if option.get("type") != "null"]
    return _resolve(options[0], components) if len(options) == 1 else schema


def _nullable(schema: dict[str, Any]) -> bool:
    return any(option.get("type") == "null" for option in schema.get("anyOf", []))


def _returned_ids(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, str]:
    """The ids an answer always carries, by the path parameter name they fill: `contact_id` at
    the top, or a record's own `id` (and its `*_id` fields) under the record's name."""
    found: dict[str, str] = {}
    for name, value in _resolve(schema, components).get("properties", {}).items():
        if LINKED_ID.match(name) and not _nullable(value):
            found.setdefault(PATH_NAME.get(name, name), f"$response.body#/{name}")
        nested = _resolve(value, components).get("properties", {})
        if "id" in nested and not _nullable(value):
            found[PATH_NAME.get(f"{name}_id", f"{name}_id")] = f"$response.body#/{name}/id"
            for inner, inner_value in nested.items():
                if LINKED_ID.match(inner) and not _nullable(inner_value):
                    found.setdefault(PATH_NAME.get(inner, inner), f"$response.body#/{name}/{inner}")
    return found


def add_links(document: dict[str, Any]) -> None:
    """Link each create or update answer to every operation whose path ids it supplies, so that
    clients (and schemathesis' stateful phase) can follow a created record to its operations."""
    components = document["components"]["schemas"]
    targets = [
        (path, method, {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"})
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method not in ("post", "put", "patch"):
                continue
            for status, response in operation["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if not status.startswith("2") or schema is None:
                    continue
                ids = _returned_ids(schema, components)
                links = {
                    f"{target_method.upper()} {target}": {
                        "operationRef": "#/paths/"
                        + target.replace("~", "~0").replace("/", "~1")
                        + f"/{target_method}",
                        "parameters": {name: ids[name] for name in sorted(names)},
                    }
                    for target, target_method, names in targets
                    if names and names <= ids.keys() and (target, target_method) != (path, method)
                }
                if links:
                    response["links"] = links


class SwitchboardOpenAPIProvider(AppOpenAPIProvider):
    def schema(self) -> dict[str, Any]:
        document = super().schema()
        json_schema_bounds(document)
        document_storable_text(document)
        add_links(document)
        return document

    def build_paths(self, rule: Rule) -> tuple[dict[str, Any], dict[str, Any]]:
        paths, components = super().build_paths(rule)
        func = self.documented_app.view_functions[rule.endpoint]
        auth = getattr(func, AUTH_ATTRIBUTE, None)
        error_schema = "FunctionsError" if rule.rule.startswith("/functions/v1") else "InboundError"
        components.update(ERROR_SCHEMAS)
        for operations in paths.values():
            for method, operation in operations.items():
                operation = dict(operation)
                operation["parameters"] = [
                    _path_parameter(parameter) if parameter["in"] == "path" else parameter
                    for parameter in operation["parameters"]
                ]
                if method == "get" and _paginated(func):
                    operation["parameters"] += _page_parameters(rule.endpoint)
                if "requestBody" in operation:
                    operation["requestBody"] = {
                        **operation["requestBody"],
                        "required": _body_required(func, operation, components),
                    }
                operations[method] = self._complete(operation, method, auth, error_schema)
        return paths, components

    def _complete(
        self, operation: dict[str, Any], method: str, auth: str | None, error_schema: str
    ) -> dict[str, Any]:
        responses = {str(code): value for code, value in operation["responses"].items()}
        errors = dict(GENERIC)
        if auth is not None:
            errors |= KEYED
            operation["security"] = [{"ApiKey": []}, {"Bearer": []}]
            if method == "post":
                errors |= KEYED_POST
                operation["parameters"] = [*operation["parameters"], IDEMPOTENCY_PARAMETER]
        else:
            operation["security"] = []
        for code, description in errors.items():
            responses.setdefault(
                str(code),
                {
                    "description": description,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{error_schema}"}
                        }
                    },
                },
            )
        for status, response in responses.items():
            completed = dict(response)
            headers = dict(COMMON_HEADERS)
            if auth is not None and status != "401":
                headers |= RATE_HEADERS
            if status == "429":
                headers["Retry-After"] = {"schema": {"type": "integer"}}
            completed["headers"] = {**headers, **completed.get("headers", {})}
            completed["description"] = completed.get("description") or errors.get(
                int(status), "Success"
            )
            responses[status] = completed
        operation["responses"] = responses
        return operation
