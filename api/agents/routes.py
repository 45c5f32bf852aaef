"""create-agent (under /functions/v1, with a sub-account key), the agent reads, change and
deletion."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app, request
from quart_schema import tag, validate_request

from api.agents import service
from api.agents.schemas import (
    AgentCreated,
    AgentDeleted,
    AgentList,
    AgentResponse,
    CreateAgentRequest,
    UpdateAgentRequest,
)
from api.auth import SUB_ACCOUNT, principal, requires, tenant_scope
from api.schemas import FunctionsError
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError

blueprint = Blueprint("agents", __name__)


def _with_scope(agent: dict[str, Any]) -> dict[str, Any]:
    caller = principal()
    return {
        **agent,
        "organization_id": caller.organisation_id,
        "sub_account_id": caller.sub_account_id,
    }


@blueprint.post("/functions/v1/crm-api/create-agent")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_request(CreateAgentRequest)
@validate_response(AgentCreated, 201)
@validate_errors(FunctionsError, 400, 403)
async def create_agent(data: CreateAgentRequest) -> tuple[dict[str, Any], int]:
    """Create an AI voice agent in the key's sub-account.

    400 validation_error when analysis.custom_field_map names a key that is no data_schema
    property or a value that is no active custom field, or data_schema requires a name it has
    no property for."""
    await service.check_fields(
        data, allow_private_webhooks=current_app.config["SETTINGS"].allow_private_webhooks
    )
    organization_id = parse_uuid(data.organization_id, "organization_id")
    sub_account_id = parse_uuid(data.sub_account_id, "sub_account_id")
    caller = principal()
    if organization_id != caller.organisation_id or sub_account_id != caller.sub_account_id:
        raise APIError(
            403, "forbidden", "organization_id and sub_account_id must be those of the API key"
        )
    agent = await service.create_agent(tenant_scope(), data)
    return {
        "success": True,
        "id": agent["id"],
        "name": agent["name"],
        "is_active": agent["is_active"],
        "created_at": agent["created_at"],
    }, 201


@blueprint.get("/webhooks/inbound/agents")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_response(AgentList, 200)
@validate_response(Error, 400)
async def list_agents() -> dict[str, Any]:
    """List the sub-account's agents with their full configuration, newest first."""
    limit, offset = pagination(request.args)
    agents, total = await service.list_agents(tenant_scope(), limit, offset)
    return page_body("agents", [_with_scope(agent) for agent in agents], total, limit, offset)


@blueprint.get("/webhooks/inbound/agents/<agent_id>")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_response(AgentResponse, 200)
@validate_errors(Error, 400, 404)
async def get_agent(agent_id: str) -> dict[str, Any]:
    """Read one agent, including its post-call webhook signing secret."""
    agent = await service.get_agent(tenant_scope(), parse_uuid(agent_id))
    return {"status": "success", "agent": _with_scope(agent)}


@blueprint.patch("/webhooks/inbound/agents/<agent_id>")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_request(UpdateAgentRequest)
@validate_response(AgentResponse, 200)
@validate_errors(Error, 400, 404)
async def update_agent(agent_id: str, data: UpdateAgentRequest) -> dict[str, Any]:
    """Change only the fields sent (activating an inactive agent, for one); the create rules
    hold for the agent as it is afterwards: 400 validation_error when it breaks one (webhook
    on with no URL stored, say), and for analysis as on create."""
    parsed_id = parse_uuid(agent_id)
    agent = await service.update_agent(
        tenant_scope(),
        parsed_id,
        data,
        allow_private_webhooks=current_app.config["SETTINGS"].allow_private_webhooks,
    )
    return {"status": "success", "agent": _with_scope(agent)}


@blueprint.delete("/webhooks/inbound/agents/<agent_id>")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_response(AgentDeleted, 200)
@validate_errors(Error, 400, 404, 409)
async def delete_agent(agent_id: str) -> dict[str, Any]:
    """Delete an agent that has no number assigned and no call still open; its calls keep it."""
    parsed_id = parse_uuid(agent_id)
    await service.delete_agent(tenant_scope(), parsed_id)
    return {"status": "success", "deleted": True, "agent_id": parsed_id}
