"""Authentication: the one place a request's key becomes a Principal (and is rate limited).

Routes declare the kind of key they take with `@requires(AGENCY)` or `@requires(SUB_ACCOUNT)`;
handlers read the result with `principal()`. A key of the wrong kind is answered like an
unknown one (401), as CONTRACT.md section 2 says.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Literal

import asyncpg
from quart import current_app, g, request

from api import idempotency
from tenancy.errors import APIError
from tenancy.logs import sub_account_id_var
from tenancy.principals import Principal
from tenancy.scope import TenantScope

AGENCY: Literal["agency"] = "agency"
SUB_ACCOUNT: Literal["sub_account"] = "sub_account"
AUTH_ATTRIBUTE = "_switchboard_auth"


def presented_key() -> str | None:
    headers: dict[str, str] = request.header_values  # type: ignore[attr-defined]  # APIRequest
    key = headers.get("x-api-key", "").strip()
    if key:
        return key
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


async def authenticate(kind: str) -> Principal:
    key = presented_key()
    if key is None:
        raise APIError(
            401, "missing_api_key", "an API key is required (x-api-key or Authorization: Bearer)"
        )
    found: Principal | None = await current_app.config["PRINCIPALS"].resolve(db_pool(), key)
    if found is None or found.kind != kind:
        raise APIError(401, "invalid_api_key", "the API key is invalid for this operation")
    g.principal = found
    if found.sub_account_id is not None:
        sub_account_id_var.set(str(found.sub_account_id))
    limiter = current_app.config["RATE_LIMITER"]
    verdict = await limiter.hit(str(found.key_id))
    if verdict is not None:
        g.rate_limit_headers = verdict.headers()
        if not verdict.allowed:
            raise APIError(429, "rate_limited", "too many requests; retry after the window resets")
    return found


def requires(
    kind: Literal["agency", "sub_account"],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            found = await authenticate(kind)
            replay = await idempotency.begin(found.key_id)
            if replay is not None:
                return replay
            return await func(*args, **kwargs)

        setattr(wrapper, AUTH_ATTRIBUTE, kind)
        return wrapper

    return decorator


def principal() -> Principal:
    return g.principal  # type: ignore[no-any-return]


def db_pool() -> asyncpg.Pool:
    """The application's database pool, for routes without a key (signed links, carriers'
    webhooks), which resolve their own scope."""
    return current_app.config["DB_POOL"]


def tenant_scope() -> TenantScope:
    """The sub-account of the request's key, for routes behind `@requires(SUB_ACCOUNT)`."""
    return TenantScope.of_principal(db_pool(), principal())
