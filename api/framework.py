"""The one place that reaches into Quart, quart-schema and werkzeug below their public API.

The fast request path (api/asgi.py, api/app.py, api/metrics.py), the response declarations
(api/validation.py, api/contacts/body.py) and the OpenAPI provider (api/openapi.py) need a few
names these libraries keep private. They are named here and nowhere else, behind small
functions and base classes with names of our own; tests/core/test_framework_canary.py names
each one and fails with the library and attribute when an upgrade moves it, and
pyproject.toml pins the versions it was checked against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import quart_schema.validation
from hypercorn.typing import ASGISendCallable
from quart import Quart, Response
from quart.asgi import ASGIHTTPConnection
from quart.asgi import _handle_exception as _quart_handle_exception
from quart.helpers import _split_blueprint_path
from quart.json.provider import DefaultJSONProvider
from quart.wrappers import Request
from quart.wrappers.request import Body
from quart_schema.openapi import OpenAPIProvider
from quart_schema.validation import (
    QUART_SCHEMA_REQUEST_ATTRIBUTE,
    QUART_SCHEMA_RESPONSE_ATTRIBUTE,
    DataSource,
)

T = TypeVar("T")


def unproxied(proxy: T) -> T:
    """The object behind a context proxy (`request`, `g`): attribute reads on it skip the
    proxy's lookup of the current context (werkzeug's LocalProxy._get_current_object)."""
    return proxy._get_current_object()  # type: ignore[attr-defined, no-any-return]


def split_blueprint_path(name: str) -> list[str]:
    """ "a.b.c" -> ["a.b.c", "a.b", "a"], as Quart's Request.blueprints computes it."""
    return _split_blueprint_path(name)


def json_response_value(
    provider: DefaultJSONProvider, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The value `app.json.response(*args, **kwargs)` serialises (Flask's rule: one argument
    is itself, several a list, keywords a dict, none None)."""
    return provider._prepare_response_obj(args, kwargs)


class WholeBody(Body):
    """Quart's request body, able to say whether it has all arrived without awaiting it."""

    def whole(self) -> bytes | None:
        """The body, if it has all arrived (and is within the size limit); else None."""
        if self._complete.is_set() and self._must_raise is None:
            return bytes(self._data)
        return None


class QuartHTTPConnection(ASGIHTTPConnection):
    """Quart's ASGI HTTP connection with the steps it keeps private under our own names:
    `new_request` builds the request from the scope, and `send_response` (which Quart's own
    handling also calls) sends an answer; `quart_send_response` is Quart's way of sending."""

    def new_request(self, send: ASGISendCallable) -> Request:
        return self._create_request_from_scope(send)

    async def _send_response(self, send: ASGISendCallable, response: Any) -> None:
        await self.send_response(send, response)

    async def send_response(self, send: ASGISendCallable, response: Any) -> None:
        await self.quart_send_response(send, response)

    async def quart_send_response(self, send: ASGISendCallable, response: Any) -> None:
        await ASGIHTTPConnection._send_response(self, send, response)


async def unhandled_error_response(app: Quart, error: Exception) -> Response:
    """Quart's answer to an exception no handler took: a traceback page in debug or testing,
    else the exception raised again (for the ASGI server to log)."""
    return await _quart_handle_exception(app, error)


def use_request_model_loader(loader: Callable[..., Any]) -> None:
    """Make quart-schema's `validate_request` and `validate_querystring` load their models
    with `loader`, called as quart-schema calls its own `model_load`:
    (data, model_class, exception_class, *, decamelize=..., preference=...). Process-wide."""
    setattr(quart_schema.validation, "model_load", loader)  # noqa: B010  (not exported)


def drop_response_conversion(app: Quart) -> None:
    """Undo the wrapper quart-schema puts around `app.make_response` (it converts models on
    every response, building a TypeAdapter each time); the app's own make_response does what
    is needed of it."""
    if "make_response" in vars(app):
        del app.make_response


def declare_response(func: Callable[..., Any], model_class: type, status_code: int) -> None:
    """Record on a route function that it answers `status_code` with `model_class`, where
    quart-schema's OpenAPI document reads it (as its own `validate_response` would)."""
    schemas = getattr(func, QUART_SCHEMA_RESPONSE_ATTRIBUTE, {})
    schemas[status_code] = (model_class, None)
    setattr(func, QUART_SCHEMA_RESPONSE_ATTRIBUTE, schemas)


def declared_response(func: Any, status_code: int) -> type | None:
    """The model `func` declares for `status_code`, or None."""
    declared = getattr(func, QUART_SCHEMA_RESPONSE_ATTRIBUTE, {}).get(status_code)
    return None if declared is None else declared[0]


def declare_json_body(func: Callable[..., Any], model_class: type) -> None:
    """Record on a route function that it takes a JSON body of `model_class`, for the OpenAPI
    document (as quart-schema's own `validate_request` would)."""
    setattr(func, QUART_SCHEMA_REQUEST_ATTRIBUTE, (model_class, DataSource.JSON))


class AppOpenAPIProvider(OpenAPIProvider):
    """quart-schema's OpenAPI provider, with the app it documents under a name of ours."""

    @property
    def documented_app(self) -> Quart:
        return self._app  # type: ignore[return-value]  # a weakref proxy of the app
