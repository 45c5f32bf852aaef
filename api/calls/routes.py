"""POST /contacts/{id}/call places an outbound AI call; GET /calls/{id} follows it; its
recording is served without a key at the signed link GET /calls/{id} shows; the sandbox carrier's
webhook rings one of our numbers with an inbound call."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request
from quart_schema import hide, tag, validate_querystring, validate_request

from api.auth import SUB_ACCOUNT, db_pool, requires, tenant_scope
from api.calls import inbound, service
from api.calls.schemas import (
    CallFilters,
    CallList,
    CallPlaced,
    CallResponse,
    InboundCallRinging,
    PlaceCallRequest,
    SandboxInboundCall,
)
from api.contacts.service import valid_phone
from api.conversations import signing
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from integrations.recordings import CONTENT_TYPE
from tenancy.errors import APIError
from tenancy.recording_links import PATH_PREFIX, LinkCheck, verify
from tenancy.scope import TenantScope

blueprint = Blueprint("calls", __name__, url_prefix="/webhooks")
recordings_blueprint = Blueprint("recordings", __name__, url_prefix=PATH_PREFIX)

# A recording is private: no shared cache keeps it, and no search engine lists its link.
RECORDING_HEADERS = {
    "Cache-Control": "private, no-store",
    "X-Robots-Tag": "noindex",
    "Referrer-Policy": "no-referrer",
}


@blueprint.post("/inbound/contacts/<contact_id>/call")
@tag(["AI calls"])
@requires(SUB_ACCOUNT)
@validate_request(PlaceCallRequest)
@validate_response(CallPlaced, 200)
@validate_errors(Error, 400, 402, 404, 409)
async def place_call(contact_id: str, data: PlaceCallRequest) -> dict[str, Any]:
    """Place an outbound AI call to the contact's phone on file; `variables` fill the agent's
    placeholders; with `start_at`, the call is `scheduled` and placed then. 400 when the
    contact has no phone on file."""
    contact_uuid = parse_uuid(contact_id)
    agent_id = parse_uuid(data.agent_id, "agent_id")
    pool_id = parse_uuid(data.pool_id, "pool_id") if data.pool_id is not None else None
    call_id = await service.place_call(
        tenant_scope(), contact_uuid, agent_id, pool_id, data.variables, data.start_at
    )
    return {
        "status": "success",
        "call_id": call_id,
        "message": "the call is queued and will be placed shortly"
        if data.start_at is None
        else "the call is scheduled and will be placed at its start_at",
    }


@blueprint.get("/inbound/calls")
@tag(["Calls"])
@requires(SUB_ACCOUNT)
@validate_querystring(CallFilters)
@validate_response(CallList, 200)
@validate_response(Error, 400)
async def list_calls(query_args: CallFilters) -> dict[str, Any]:
    """List calls, newest first, optionally by contact, agent, status or direction."""
    limit, offset = pagination(request.args)
    search = service.CallSearch(
        contact_id=query_args.contact_id,
        agent_id=query_args.agent_id,
        status=query_args.status,
        direction=query_args.direction,
    )
    calls, total = await service.list_calls(tenant_scope(), search, limit, offset)
    return page_body("calls", calls, total, limit, offset)


@blueprint.get("/inbound/calls/<call_id>")
@tag(["Calls"])
@requires(SUB_ACCOUNT)
@validate_response(CallResponse, 200)
@validate_errors(Error, 400, 404)
async def get_call(call_id: str) -> dict[str, Any]:
    """Read a call: its status and, once ended, its duration, transcript and recording."""
    call = await service.get_call(tenant_scope(), parse_uuid(call_id))
    return {"status": "success", "call": call}


@blueprint.post("/inbound/calls/<call_id>/cancel")
@tag(["Scheduled Calls"])
@requires(SUB_ACCOUNT)
@validate_response(CallResponse, 200)
@validate_errors(Error, 400, 404, 409)
async def cancel_call(call_id: str) -> dict[str, Any]:
    """Cancel a call not yet placed (scheduled or queued); 409 `not_cancellable` once placed."""
    call = await service.cancel_call(tenant_scope(), parse_uuid(call_id))
    return {"status": "success", "call": call}


@recordings_blueprint.get("/<sub_account_id>/<call_id>.wav")
@hide
async def get_recording(sub_account_id: str, call_id: str) -> Response:
    """The call's recording (audio/wav) for a signed link: no API key, Range supported."""
    sub_account_uuid = parse_uuid(sub_account_id, "sub_account_id")
    call_uuid = parse_uuid(call_id, "call_id")
    check = verify(
        sub_account_uuid, call_uuid, request.args.get("expires"), request.args.get("signature")
    )
    if check is LinkCheck.EXPIRED:
        raise APIError(
            403,
            "recording_link_expired",
            "the recording link has expired; read the call again for a fresh one",
        )
    if check is not LinkCheck.VALID:
        raise APIError(403, "recording_link_invalid", "the recording link's signature is wrong")
    wav = await service.call_recording(
        await TenantScope.of_active_sub_account(db_pool(), sub_account_uuid), call_uuid
    )
    response = Response(
        wav,
        status=200,
        content_type=CONTENT_TYPE,
        headers={
            **RECORDING_HEADERS,
            "Accept-Ranges": "bytes",
            "Content-Disposition": f'inline; filename="{call_uuid}.wav"',
        },
    )
    return await response.make_conditional(request, accept_ranges=True, complete_length=len(wav))


@blueprint.post("/providers/sandbox/calls/<sub_account_id>")
@tag(["Calls"])
@validate_response(InboundCallRinging, 202)
@validate_errors(Error, 400, 401, 404, 409)
async def sandbox_inbound_call(sub_account_id: str) -> tuple[dict[str, Any], int]:
    """The sandbox carrier's webhook: ring one of the sub-account's numbers from `from`.

    Signed like the sandbox SMS webhook (`X-Sandbox-Signature`); the number's agent answers and
    the caller plays the sandbox script of its own number (CONTRACT 6). An optional `call_sid`
    (1 to 64 of `A-Z a-z 0-9 _ -`) makes a repeated webhook ring once: for 24 hours the same
    call_sid answers 202 with the first call's ids, whatever its numbers (CONTRACT 11).
    """
    sub_account_uuid = parse_uuid(sub_account_id, "sub_account_id")
    raw = await request.get_data(as_text=False)
    assert isinstance(raw, bytes)
    data = signing.signed_body(
        SandboxInboundCall, sub_account_uuid, raw, request.headers.get(signing.HEADER)
    )
    caller, number = _phone(data.from_number, "from"), _phone(data.to, "to")
    scope = await TenantScope.of_active_or_404(db_pool(), sub_account_uuid)
    call = await inbound.ring_sandbox(scope, caller, number, data.call_sid)
    return {"status": "success", "call_id": call.call_id, "contact_id": call.contact_id}, 202


def _phone(value: str, name: str) -> str:
    phone = valid_phone(value)
    if phone is None:
        raise APIError(
            400,
            "validation_error",
            f"{name} must be an E.164 phone number",
            details=[{"field": name, "message": "not an E.164 number", "type": "value_error"}],
        )
    return phone
