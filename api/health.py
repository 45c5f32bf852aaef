"""Liveness and readiness probes."""

from quart import Blueprint, current_app
from quart_schema import hide

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
@hide
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@blueprint.get("/readyz")
@hide
async def readyz() -> tuple[dict[str, object], int]:
    checks: dict[str, str] = {}
    try:
        await current_app.config["DB_POOL"].fetchval("SELECT 1")
        checks["database"] = "ok"
    except Exception:
        checks["database"] = "unavailable"
    try:
        await current_app.config["REDIS"].ping()
        checks["redis"] = "ok"
    except Exception:
        checks["redis"] = "unavailable"
    ready = all(value == "ok" for value in checks.values())
    return {"status": "ok" if ready else "unavailable", "checks": checks}, 200 if ready else 503
