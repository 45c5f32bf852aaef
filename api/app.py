"""The Quart application factory."""

from __future__ import annotations

import asyncio
import contextlib
import decimal
import inspect
import logging
import random
import re
import time
import types
import uuid
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

import redis.asyncio as aioredis
import swagger_ui_bundle
from arq import create_pool as create_arq_pool
from arq.connections import RedisSettings
from pydantic import BaseModel
from quart import Blueprint, Quart, Response, g, request, send_from_directory
from quart.json.provider import DefaultJSONProvider
from quart.sessions import NullSession, SessionInterface
from quart.wrappers import Request
from quart_schema import Info, QuartSchema
from werkzeug.sansio.utils import get_content_length

from api import idempotency, metrics
from api.asgi import HTTPConnection
from api.errors import (
    refuse_another_resources_method,
    register_error_handlers,
    resource_methods,
)
from api.framework import (
    WholeBody,
    drop_response_conversion,
    json_response_value,
    split_blueprint_path,
    unproxied,
)
from api.openapi import SwitchboardOpenAPIProvider
from api.ratelimit import RateLimiter
from api.types import refuse_unstorable_text
from api.validation import check_response, install_request_model_loading
from tenancy import jsonenc
from tenancy.db import create_pool, retry_stale_statements, session_url
from tenancy.errors import APIError
from tenancy.logs import request_id_var, sub_account_id_var
from tenancy.principals import PrincipalCache
from tenancy.settings import Settings, get_settings

API_VERSION = "2026.10.07"
REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
log = logging.getLogger("switchboard.api")


class JSONProvider(DefaultJSONProvider):
    """Bodies as `tenancy.jsonenc` writes them (money, a Decimal, as a float)."""

    sort_keys = False
    default = staticmethod(jsonenc.default)

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        # Money arrives as JSON numbers: keep them exact.
        return super().loads(s, parse_float=decimal.Decimal, **kwargs)

    def encode(self, value: Any) -> bytes:
        return jsonenc.encode(value)

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if kwargs:
            return super().dumps(obj, **kwargs)
        return self.encode(obj).decode()

    def response(self, *args: Any, **kwargs: Any) -> Response:
        body = self.encode(json_response_value(self, args, kwargs))
        return Response(body, mimetype="application/json")


class SwitchboardApp(Quart):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._coroutine_functions: set[Callable[..., Any]] = set()

    def ensure_async(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Quart's, remembering which plain functions are coroutine functions: it is asked for
        every hook and view of every request, and inspect answers slowly."""
        if func in self._coroutine_functions:
            return func
        if isinstance(func, types.FunctionType) and inspect.iscoroutinefunction(func):
            self._coroutine_functions.add(func)
            return func
        return super().ensure_async(func)

    async def make_default_options_response(self) -> Response:
        """Quart's, with Allow naming only the methods of the resource the path names."""
        return self.response_class("", headers={"Allow": ", ".join(resource_methods())})

    async def dispatch_request(self, request_context: Any = None) -> Any:
        """Quart's, run again when a statement cached before a tenant's schema change fails
        before the request committed anything (`switchboard migrate` under traffic)."""
        return await retry_stale_statements(
            lambda: super(SwitchboardApp, self).dispatch_request(request_context),
            on_retry=_log_stale_statement,
        )

    async def make_response(self, result: Any) -> Any:
        """Quart's, plus: a pydantic model becomes its dict (fields set only), and with
        SWITCHBOARD_VALIDATE_RESPONSES each body is checked against its declared model."""
        value, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
        if isinstance(value, BaseModel):
            value = value.model_dump(exclude_unset=True)
            result = (value, *rest) if rest else value
        if self.config["SETTINGS"].validate_responses:
            status = next((r for r in rest if isinstance(r, int)), 200)
            check_response(value, status)
        return await super().make_response(result)


def _log_stale_statement(error: Exception) -> None:
    log.info(
        "a cached statement went stale after a schema change (%s); running the request again",
        type(error).__name__,
    )


class NoSessions(SessionInterface):
    """The API keeps no sessions (every request carries its key): one shared NullSession, which
    refuses writes, instead of a signing-key check and a new object per request."""

    null = NullSession()

    async def open_session(self, app: Quart, request: Any) -> NullSession:
        return self.null


class APIRequest(Request):
    body_class = WholeBody

    async def get_data(  # type: ignore[override]
        self,
        cache: bool = True,
        as_text: bool = False,
        parse_form_data: bool = False,
    ) -> str | bytes:
        """Quart's, without its asyncio.wait_for (a new task) when the body is already whole,
        as it almost always is here (api/asgi.py reads it before the handler runs)."""
        whole: bytes | None = None if parse_form_data else self.body.whole()  # type: ignore[attr-defined]
        if whole is None:
            return await super().get_data(cache, as_text, parse_form_data)
        if not cache:
            self.body.clear()
        return whole.decode() if as_text else whole

    @cached_property
    def header_values(self) -> dict[str, str]:
        """Each header's first value by lower-case name, read once from the ASGI scope: a
        lookup here costs a dict probe, where werkzeug's Headers scans and lower-cases every
        header and raises (and catches) a KeyError for a missing one."""
        found: dict[str, str] = {}
        for name, value in self.scope.get("headers", ()):
            found.setdefault(name.decode("latin1").lower(), value.decode("latin1"))
        return found

    @cached_property
    def content_length(self) -> int | None:
        # werkzeug's, reading header_values: its Headers.get finds a missing Transfer-Encoding
        # by raising (and catching) a BadRequestKeyError, on every request.
        return get_content_length(
            self.header_values.get("content-length"), self.header_values.get("transfer-encoding")
        )

    @property
    def blueprints(self) -> list[str]:
        # Quart's runs an import statement on every call, and each request asks several times.
        name = self.blueprint
        return split_blueprint_path(name) if name is not None else []

    async def get_json(self, force: bool = False, silent: bool = False, cache: bool = True) -> Any:
        try:
            result = await super().get_json(force=force, silent=silent, cache=cache)
        except RecursionError:
            raise APIError(400, "invalid_json", "the JSON body is nested too deeply") from None
        except UnicodeDecodeError:
            raise APIError(400, "invalid_json", "the body is not valid UTF-8") from None
        if not silent:
            refuse_unstorable_text(result)
        return result

    def on_json_loading_failed(self, error: Exception) -> Any:
        raise APIError(400, "invalid_json", "the body is not valid JSON")


def create_app(settings: Settings | None = None, blueprints: Iterable[Blueprint] = ()) -> Quart:
    """The app with the HTTP shell and `blueprints` (the composition root's list,
    cli/wiring.py, registered in that order)."""
    settings = settings or get_settings()
    app = SwitchboardApp("switchboard")
    app.request_class = APIRequest
    app.session_interface = NoSessions()  # type: ignore[assignment]
    app.asgi_http_class = HTTPConnection
    app.config["SETTINGS"] = settings
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.config["QUART_SCHEMA_SWAGGER_JS_URL"] = "/docs/assets/swagger-ui-bundle.js"
    app.config["QUART_SCHEMA_SWAGGER_CSS_URL"] = "/docs/assets/swagger-ui.css"
    QuartSchema(
        app,
        info=Info(
            title="Switchboard",
            version=API_VERSION,
            description="Contact, messaging and voice-agent platform API",
        ),
        openapi_path="/openapi.json",
        swagger_ui_path="/docs",
        redoc_ui_path=None,
        scalar_ui_path=None,
        security_schemes={
            "ApiKey": {"type": "apiKey", "in_": "header", "name": "x-api-key"},
            "Bearer": {"type": "http", "scheme": "bearer"},
        },
        conversion_preference="pydantic",
        openapi_provider_class=SwitchboardOpenAPIProvider,
        pydantic_dump_options={"exclude_unset": True},
    )
    # quart-schema wraps make_response to convert models on every response, building a
    # TypeAdapter each time; SwitchboardApp.make_response does what is needed of that.
    drop_response_conversion(app)
    # After QuartSchema, which installs a provider of its own.
    app.json_provider_class = JSONProvider
    app.json = JSONProvider(app)
    install_request_model_loading()
    register_error_handlers(app)
    _register_lifecycle(app, settings)
    for blueprint in blueprints:
        app.register_blueprint(blueprint)

    @app.get("/docs/assets/<path:name>")
    async def docs_asset(name: str) -> Response:
        return await send_from_directory(str(swagger_ui_bundle.swagger_ui_path), name)

    return app


def _register_lifecycle(app: Quart, settings: Settings) -> None:
    @app.before_serving
    async def open_clients() -> None:
        from tenancy.runtime import resolve_urls

        database_url, redis_url = resolve_urls(settings)
        app.config["DB_POOL"] = await create_pool(
            database_url, min_size=settings.db_pool_min, max_size=settings.db_pool_max
        )
        client = aioredis.from_url(  # type: ignore[no-untyped-call]  # redis-py: unannotated
            redis_url, socket_timeout=2, socket_connect_timeout=2
        )
        app.config["REDIS"] = client
        app.config["ARQ"] = await create_arq_pool(RedisSettings.from_dsn(redis_url))
        principals = PrincipalCache(
            settings.auth_cache_seconds, notified_ttl=settings.auth_cache_notified_seconds
        )
        app.config["PRINCIPALS"] = principals
        if principals.ttl > 0 and principals.notified_ttl > principals.ttl:
            listening = principals.listen(session_url(database_url), app.config["DB_POOL"])
            app.config["PRINCIPALS_LISTENER"] = asyncio.create_task(listening)
        app.config["RATE_LIMITER"] = RateLimiter(
            client,
            settings.rate_limit_requests,
            settings.rate_limit_window_seconds,
            settings.rate_limit_fail_open,
        )

    @app.after_serving
    async def close_clients() -> None:
        listener = app.config.pop("PRINCIPALS_LISTENER", None)
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        await app.config["DB_POOL"].close()
        await app.config["REDIS"].aclose()
        await app.config["ARQ"].aclose()

    # One hook before and one after each request: Quart awaits every hook separately.
    @app.before_request
    async def begin_request() -> None:
        # The objects behind the `request` and `g` proxies, looked up once.
        current: APIRequest = unproxied(request)  # type: ignore[assignment]
        state = unproxied(g)
        state.started = time.perf_counter()
        incoming = current.header_values.get("x-request-id", "")
        state.request_id = (
            incoming if REQUEST_ID.fullmatch(incoming) else f"{random.getrandbits(128):032x}"
        )
        request_id_var.set(state.request_id)
        sub_account_id_var.set(None)
        if current.view_args:
            refuse_unstorable_text(current.view_args, "path")
            refuse_another_resources_method(current.view_args)
        if current.query_string:
            refuse_unstorable_text(current.args.to_dict(flat=False), "query")

    @app.after_request
    async def end_request(response: Response) -> Response:
        state = unproxied(g)
        # Added, not set: nothing else writes these names, and set() scans every header.
        response.headers.extend(
            [
                ("X-Request-ID", getattr(state, "request_id", None) or uuid.uuid4().hex),
                ("X-API-Version", API_VERSION),
                *getattr(state, "rate_limit_headers", {}).items(),
            ]
        )
        await idempotency.finish(response)
        metrics.observe(response, getattr(g, "started", None))
        return response
