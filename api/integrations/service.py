"""Connecting LLM and speech vendors: the key is stored for the agents' use and never shown
again."""

from __future__ import annotations

from typing import Any

from tenancy import secrets
from tenancy.errors import APIError
from tenancy.scope import TenantScope
from tenancy.tables.voice import PROVIDERS

UPSERT_INTEGRATION = """
INSERT INTO integrations (provider, api_key) VALUES ($1, $2)
ON CONFLICT (sub_account_id, provider) DO UPDATE SET api_key = EXCLUDED.api_key, updated_at = now()
"""

SELECT_INTEGRATIONS = "SELECT provider, updated_at FROM integrations"


def check_provider(provider: str) -> str:
    if provider not in PROVIDERS:
        raise APIError(404, "not_found", "unknown provider; one of " + ", ".join(PROVIDERS))
    return provider


async def connect(scope: TenantScope, provider: str, api_key: str) -> None:
    async with scope.transaction() as conn:
        await conn.execute(
            UPSERT_INTEGRATION, check_provider(provider), secrets.encrypt(api_key.strip())
        )


async def list_integrations(scope: TenantScope) -> list[dict[str, Any]]:
    async with scope.transaction() as conn:
        rows = {row["provider"]: row["updated_at"] for row in await conn.fetch(SELECT_INTEGRATIONS)}
    return [
        {"provider": provider, "connected": provider in rows, "updated_at": rows.get(provider)}
        for provider in PROVIDERS
    ]
