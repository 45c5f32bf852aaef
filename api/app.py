"""The Quart application factory."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import logging
import re
import uuid
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
import swagger_ui_bundle
from arq import create_pool as create_arq_pool
from arq.connections import RedisSettings
from pydantic_core import to_jsonable_python
from quart import Quart, Response, g, request, send_from_directory
from quart.json.provider import DefaultJSONProvider
from quart.wrappers import Request
from quart_schema import Info, QuartSchema

from api import idempotency, metrics
from api.errors import APIError, register_error_handlers
from api.openapi import SwitchboardOpenAPIProvider
from api.ratelimit import RateLimiter
from api.types import refuse_unstorable_text
from tenancy.clock import iso
from tenancy.db import create_pool
from tenancy.logs import request_id_var, sub_account_id_var
from tenancy.principals import PrincipalCache
from tenancy.settings import Settings, get_settings

API_VERSION = "2026.10.07"
REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
log = logging.getLogger("switchboard.api")


class JSONProvider(DefaultJSONProvider):
    sort_keys = False

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        # Money arrives as JSON numbers: keep them exact.
        return super().loads(s, parse_float=decimal.Decimal, **kwargs)

    @staticmethod
    def default(value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return iso(value)
        if isinstance(value, decimal.Decimal):
            return float(value)
        if isinstance(value, uuid.UUID | dt.date):
            return str(value) if isinstance(value, uuid.UUID) else value.isoformat()
        return to_jsonable_python(value)


class APIRequest(Request):
    async def get_json(self, force: bool = False, silent: bool = False,
                       cache: bool = True) -> Any:
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


def create_app(settings: Settings | None = None) -> Quart:
    settings = settings or get_settings()
    app = Quart("switchboard")
    app.request_class = APIRequest
    app.config["SETTINGS"] = settings
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.config["QUART_SCHEMA_SWAGGER_JS_URL"] = "/docs/assets/swagger-ui-bundle.js"
    app.config["QUART_SCHEMA_SWAGGER_CSS_URL"] = "/docs/assets/swagger-ui.css"
    QuartSchema(
        app,
        info=Info(title="Switchboard", version=API_VERSION,
                  description="Contact, messaging and voice-agent platform API"),
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
    # After QuartSchema, which installs a provider of its own.
    app.json_provider_class = JSONProvider
    app.json = JSONProvider(app)
    register_error_handlers(app)
    _register_lifecycle(app, settings)
    metrics.install(app)
    _register_blueprints(app)

    @app.get("/docs/assets/<path:name>")
    async def docs_asset(name: str) -> Response:
        return await send_from_directory(str(swagger_ui_bundle.swagger_ui_path), name)

    return app


def _register_blueprints(app: Quart) -> None:
    """Every `blueprint` in api/*/routes.py (and api/health.py), in name order."""
    from api import health

    app.register_blueprint(health.blueprint)
    package = Path(__file__).resolve().parent
    for folder in sorted(p for p in package.iterdir() if (p / "routes.py").exists()):
        module = importlib.import_module(f"api.{folder.name}.routes")
        app.register_blueprint(module.blueprint)


def _register_lifecycle(app: Quart, settings: Settings) -> None:
    @app.before_serving
    async def open_clients() -> None:
        from tenancy.runtime import resolve_urls

        database_url, redis_url = resolve_urls(settings)
        app.config["DB_POOL"] = await create_pool(
            database_url, min_size=settings.db_pool_min, max_size=settings.db_pool_max)
        client = aioredis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        app.config["REDIS"] = client
        app.config["ARQ"] = await create_arq_pool(RedisSettings.from_dsn(redis_url))
        app.config["PRINCIPALS"] = PrincipalCache(settings.auth_cache_seconds)
        app.config["RATE_LIMITER"] = RateLimiter(
            client, settings.rate_limit_requests, settings.rate_limit_window_seconds,
            settings.rate_limit_fail_open)

    @app.after_serving
    async def close_clients() -> None:
        await app.config["DB_POOL"].close()
        await app.config["REDIS"].aclose()
        await app.config["ARQ"].aclose()

    @app.before_request
    async def assign_request_id() -> None:
        incoming = request.headers.get("x-request-id", "")
        g.request_id = incoming if REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request_id_var.set(g.request_id)
        sub_account_id_var.set(None)

    @app.before_request
    async def refuse_unstorable_url_text() -> None:
        refuse_unstorable_text(request.view_args or {}, "path")
        refuse_unstorable_text(request.args.to_dict(flat=False), "query")

    @app.after_request
    async def stamp_headers(response: Response) -> Response:
        response.headers["X-Request-ID"] = getattr(g, "request_id", None) or uuid.uuid4().hex
        response.headers["X-API-Version"] = API_VERSION
        for name, value in getattr(g, "rate_limit_headers", {}).items():
            response.headers[name] = value
        await idempotency.finish(response)
        return response
