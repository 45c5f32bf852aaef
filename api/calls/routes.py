"""POST /contacts/{id}/call places an outbound AI call; GET /calls/{id} follows it."""

from __future__ import annotations

from typing import Any

from quart import Blueprint
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.calls import service
from api.calls.schemas import CallPlaced, CallResponse, PlaceCallRequest
from api.schemas import InboundError as Error
from api.types import parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("calls", __name__, url_prefix="/webhooks/inbound")


@blueprint.post("/contacts/<contact_id>/call")
@tag(["AI calls"])
@requires(SUB_ACCOUNT)
@validate_request(PlaceCallRequest)
@validate_response(CallPlaced, 200)
@validate_errors(Error, 400, 402, 404)
async def place_call(contact_id: str, data: PlaceCallRequest) -> dict[str, Any]:
    """Place an outbound AI call to the contact's phone on file."""
    contact_uuid = parse_uuid(contact_id)
    agent_id = parse_uuid(data.agent_id, "agent_id")
    pool_id = parse_uuid(data.pool_id, "pool_id") if data.pool_id is not None else None
    call_id = await service.place_call(tenant_scope(), contact_uuid, agent_id, pool_id)
    return {"status": "success", "call_id": call_id,
            "message": "the call is queued and will be placed shortly"}


@blueprint.get("/calls/<call_id>")
@tag(["Calls"])
@requires(SUB_ACCOUNT)
@validate_response(CallResponse, 200)
@validate_errors(Error, 400, 404)
async def get_call(call_id: str) -> dict[str, Any]:
    """Read a call: its status and, once ended, its duration, transcript and recording."""
    call = await service.get_call(tenant_scope(),
                                  parse_uuid(call_id))
    return {"status": "success", "call": call}
