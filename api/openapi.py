"""The OpenAPI document describes every answer the service gives, errors included.

quart-schema documents what each route declares; this provider adds what every route shares:
the key it takes (security), the error envelope for the generic failures (400, 401, 403, 404,
413, 429, 500, 503), the Idempotency-Key header and its 409/422 on keyed POSTs, and the
headers every answer carries.
"""

from __future__ import annotations

from typing import Any

from quart_schema.openapi import OpenAPIProvider
from werkzeug.routing import Rule

from api.auth import AUTH_ATTRIBUTE

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
KEYED = {401: "Missing or invalid API key", 403: "Outside the key's scope",
         429: "Rate limited"}
KEYED_POST = {409: "Conflict (or the Idempotency-Key request is still running)",
              422: "Idempotency-Key reused with a different request"}

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
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
}


class SwitchboardOpenAPIProvider(OpenAPIProvider):
    def build_paths(self, rule: Rule) -> tuple[dict, dict]:
        paths, components = super().build_paths(rule)
        func = self._app.view_functions[rule.endpoint]
        auth = getattr(func, AUTH_ATTRIBUTE, None)
        error_schema = "FunctionsError" if rule.rule.startswith("/functions/v1") else "InboundError"
        components.update(ERROR_SCHEMAS)
        for operations in paths.values():
            for method, operation in operations.items():
                operations[method] = self._complete(dict(operation), method, auth, error_schema)
        return paths, components

    def _complete(self, operation: dict[str, Any], method: str, auth: str | None,
                  error_schema: str) -> dict[str, Any]:
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
            responses.setdefault(str(code), {
                "description": description,
                "content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{error_schema}"}}},
            })
        for status, response in responses.items():
            completed = dict(response)
            headers = dict(COMMON_HEADERS)
            if auth is not None and status != "401":
                headers |= RATE_HEADERS
            if status == "429":
                headers["Retry-After"] = {"schema": {"type": "integer"}}
            completed["headers"] = {**headers, **completed.get("headers", {})}
            completed["description"] = completed.get("description") or errors.get(
                int(status), "Success")
            responses[status] = completed
        operation["responses"] = responses
        return operation
