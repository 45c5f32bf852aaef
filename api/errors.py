"""One error type for the whole API and the envelope every error response is rendered in."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from quart import Quart, Response, current_app, jsonify, request
from quart.globals import request_ctx
from quart_schema import RequestSchemaValidationError
from quart_schema.openapi import QUART_SCHEMA_HIDDEN_ATTRIBUTE
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from tenancy.errors import APIError, refuse

__all__ = ["refuse_another_resources_method", "register_error_handlers", "resource_methods"]

log = logging.getLogger("switchboard.api")

FUNCTIONS_PREFIX = "/functions/v1"

HTTP_CODES = {
    400: "bad_request",
    401: "invalid_api_key",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal_error",
    503: "service_unavailable",
}


def error_body(
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    if request.path.startswith(FUNCTIONS_PREFIX):
        body: dict[str, Any] = {"success": False, "error": error}
    else:
        body = {"status": "error", "error": error}
    body.update(extra or {})
    return body


def error_response(status: int, code: str, message: str, **kwargs: Any) -> Response:
    headers = kwargs.pop("headers", None) or {}
    response = jsonify(error_body(code, message, **kwargs))
    response.status_code = status
    response.headers.update(headers)
    return response


def validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {
            "field": ".".join(str(part) for part in err["loc"]) or "body",
            "message": err["msg"],
            "type": err["type"],
        }
        for err in exc.errors(include_input=False, include_url=False)
    ]


async def _consume_body() -> None:
    """Read the unread request body (within the size limit) before an early answer, so the
    server keeps the connection for the client's next request instead of closing it unasked."""
    try:
        await request.get_data()
    except Exception:  # noqa: BLE001 - the answer matters more than the body
        pass


def resource_methods() -> list[str]:
    """The methods of the resource this request's path names, for an Allow header. werkzeug
    counts every rule the path fits: `/phone-numbers/purchase` also fits
    `/phone-numbers/<number_id>`, whose GET and DELETE belong to another resource. The resource
    is the rule OPTIONS reaches (every rule answers OPTIONS, and a fixed segment outranks a
    variable one); its methods are those that reach a rule with the same pattern."""
    adapter = request_ctx.url_adapter
    if adapter is None:
        return []
    candidates = adapter.allowed_methods()
    try:
        named, _ = adapter.match(method="OPTIONS", return_rule=True)
    except HTTPException:
        return list(candidates)
    reached: dict[str, bool] = {}  # method: whether its view is hidden from the document
    for method in candidates:
        try:
            rule, _ = adapter.match(method=method, return_rule=True)
        except HTTPException:
            continue
        if rule.rule == named.rule:
            view = current_app.view_functions.get(rule.endpoint)
            reached[method] = bool(getattr(view, QUART_SCHEMA_HIDDEN_ATTRIBUTE, False))
    # Beside documented operations, a page for browsers (the invitation link's GET, and the
    # HEAD Quart adds to it) is not advertised: Allow names what the OpenAPI document has.
    if not all(reached.values()):
        return [method for method, hidden in reached.items() if not hidden or method == "OPTIONS"]
    return list(reached)


def refuse_another_resources_method(view_args: dict[str, Any]) -> None:
    """405 when the path names a resource without this method and fits the route only through
    its variable part: GET /phone-numbers/import is a method the import does not have, not a
    number whose id is "import". Only paths with a value other than a UUID are looked at."""
    if all(isinstance(value, str) and len(value) == 36 for value in view_args.values()):
        return
    allowed = resource_methods()
    if request.method not in allowed:
        raise MethodNotAllowed(valid_methods=allowed)


async def _not_an_object_message() -> str:
    """Names the Content-Type when that is the mistake (`curl -d` sends a form type), since the
    body itself may well be a JSON object."""
    sent = request.headers.get("Content-Type")
    if not request.is_json and (await request.get_data(as_text=False)).strip():
        named = f"Content-Type {sent.split(';')[0].strip()!r}" if sent else "no Content-Type"
        return (
            f"the body must be JSON sent with Content-Type: application/json; this request "
            f"has {named}"
        )
    return "the body must be a JSON object"


def register_error_handlers(app: Quart) -> None:
    @app.errorhandler(APIError)
    async def handle_api_error(exc: APIError) -> Response:
        return error_response(
            exc.status,
            exc.code,
            exc.message,
            details=exc.details,
            extra=exc.extra,
            headers=exc.headers,
        )

    @app.errorhandler(RequestSchemaValidationError)
    async def handle_validation(exc: RequestSchemaValidationError) -> Response:
        inner = exc.validation_error
        if isinstance(inner, ValidationError):
            details = validation_details(inner)
            # A body that is no JSON object at all.
            if (
                len(details) == 1
                and details[0]["field"] == "body"
                or (
                    details
                    and details[0]["type"] in ("model_type", "dict_type")
                    and details[0]["field"] in ("body", "")
                )
            ):
                return error_response(
                    400, "validation_error", await _not_an_object_message(), details=details
                )
            refused = refuse(details)  # validation_error, or invalid_uuid for an id
            return error_response(400, refused.code, refused.message, details=details)
        return error_response(400, "validation_error", "invalid request")

    @app.errorhandler(HTTPException)
    async def handle_http(exc: HTTPException) -> Response:
        status = exc.code or 500
        code = HTTP_CODES.get(status, "http_error")
        message = {
            404: "no such route",
            405: "method not allowed for this route",
            413: "request body too large",
        }.get(status, exc.name or "error")
        headers = {}
        if getattr(exc, "valid_methods", None):
            headers["Allow"] = ", ".join(resource_methods())
        return error_response(status, code, message, headers=headers)

    @app.errorhandler(Exception)
    async def handle_unexpected(exc: Exception) -> Response:
        from tenancy.db_errors import unavailable

        if unavailable(exc):
            log.warning("database or queue unavailable: %s", type(exc).__name__)
            await _consume_body()
            return error_response(
                503,
                "service_unavailable",
                "a backing service is unavailable; retry shortly",
                headers={"Retry-After": "1"},
            )
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal_error", "internal error")
