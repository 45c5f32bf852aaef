"""Tools under /webhooks/inbound (CONTRACT 10): what an agent's model may call on a call."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.schemas import InboundError as Error
from api.tools import service
from api.tools.schemas import (
    CreateToolRequest,
    ToolDeleted,
    ToolList,
    ToolResponse,
    UpdateToolRequest,
)
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("tools", __name__, url_prefix="/webhooks/inbound")


def _allow_private() -> bool:
    return bool(current_app.config["SETTINGS"].allow_private_webhooks)


@blueprint.post("/tools")
@tag(["Tools"])
@requires(SUB_ACCOUNT)
@validate_request(CreateToolRequest)
@validate_response(ToolResponse, 201)
@validate_errors(Error, 400, 404, 409)
async def create_tool(data: CreateToolRequest) -> tuple[dict[str, Any], int]:
    """Create a tool (http, transfer_call, send_sms, check_availability or book_appointment)
    that agents may offer their model; a calendar tool's calendar must be the sub-account's.

    400 validation_error for a transfer number that no country assigns (libphonenumber),
    parameters requiring a name they have no property for, a header named twice in different
    case, or a header value "***" (which stands for a stored value)."""
    tool = await service.create_tool(tenant_scope(), data, allow_private_webhooks=_allow_private())
    return {"status": "success", "tool": tool}, 201


@blueprint.get("/tools")
@tag(["Tools"])
@requires(SUB_ACCOUNT)
@validate_response(ToolList, 200)
@validate_response(Error, 400)
async def list_tools() -> dict[str, Any]:
    """List the sub-account's tools, newest first."""
    limit, offset = pagination(request.args)
    tools, total = await service.list_tools(tenant_scope(), limit, offset)
    return page_body("tools", tools, total, limit, offset)


@blueprint.get("/tools/<tool_id>")
@tag(["Tools"])
@requires(SUB_ACCOUNT)
@validate_response(ToolResponse, 200)
@validate_errors(Error, 400, 404)
async def get_tool(tool_id: str) -> dict[str, Any]:
    """Read a tool, with its signing secret (header values read back as "***")."""
    tool = await service.get_tool(tenant_scope(), parse_uuid(tool_id))
    return {"status": "success", "tool": tool}


@blueprint.patch("/tools/<tool_id>")
@tag(["Tools"])
@requires(SUB_ACCOUNT)
@validate_request(UpdateToolRequest)
@validate_response(ToolResponse, 200)
@validate_errors(Error, 400, 404, 409)
async def update_tool(tool_id: str, data: UpdateToolRequest) -> dict[str, Any]:
    """Change a tool's name, description or config (sent whole; a header sent as "***" keeps
    its value); its type and parameters never change. 400 validation_error for a config of
    another type than the tool's, for what create refuses, and for "***" as the value of a
    header the tool does not have."""
    tool = await service.update_tool(
        tenant_scope(), parse_uuid(tool_id), data, allow_private_webhooks=_allow_private()
    )
    return {"status": "success", "tool": tool}


@blueprint.delete("/tools/<tool_id>")
@tag(["Tools"])
@requires(SUB_ACCOUNT)
@validate_response(ToolDeleted, 200)
@validate_errors(Error, 400, 404, 409)
async def delete_tool(tool_id: str) -> dict[str, Any]:
    """Delete a tool that no agent uses."""
    parsed_id = parse_uuid(tool_id)
    await service.delete_tool(tenant_scope(), parsed_id)
    return {"status": "success", "deleted": True, "tool_id": parsed_id}
