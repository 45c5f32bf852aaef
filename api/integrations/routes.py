"""PUT /integrations/{provider} connects an LLM or speech vendor; GET /integrations shows which
are."""

from __future__ import annotations

from typing import Any

from quart import Blueprint
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.integrations import service
from api.integrations.schemas import Connected, ConnectRequest, IntegrationList
from api.schemas import InboundError as Error
from api.validation import validate_errors, validate_response

blueprint = Blueprint("integrations", __name__, url_prefix="/webhooks/inbound")


@blueprint.put("/integrations/<provider>")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_request(ConnectRequest)
@validate_response(Connected, 200)
@validate_errors(Error, 400, 404)
async def connect(provider: str, data: ConnectRequest) -> dict[str, Any]:
    """Connect (or re-key) a vendor: the LLM providers openai, anthropic, google, deepseek and
    grok, and the speech vendors deepgram, elevenlabs and cartesia."""
    await service.connect(tenant_scope(), provider, data.api_key)
    return {"status": "success", "provider": provider, "connected": True}


@blueprint.get("/integrations")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_response(IntegrationList, 200)
async def list_integrations() -> dict[str, Any]:
    """Which LLM and speech vendors are connected (their keys are never shown)."""
    items = await service.list_integrations(tenant_scope())
    return {"status": "success", "integrations": items}
