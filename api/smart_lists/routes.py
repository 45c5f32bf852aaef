"""Smart lists under /webhooks/inbound: contacts carrying any of a set of tags."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.contacts.service import normalise_tags
from api.schemas import InboundError as Error
from api.smart_lists import service
from api.smart_lists.schemas import CreateSmartListRequest, SmartListPage, SmartListResponse
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError

blueprint = Blueprint("smart_lists", __name__, url_prefix="/webhooks/inbound")


@blueprint.post("/smart-lists")
@tag(["Smart Lists"])
@requires(SUB_ACCOUNT)
@validate_request(CreateSmartListRequest)
@validate_response(SmartListResponse, 201)
@validate_response(Error, 400)
async def create_smart_list(data: CreateSmartListRequest) -> tuple[dict[str, Any], int]:
    """Create a smart list: the contacts carrying any of `tags` (normalised as tags are)."""
    tags = normalise_tags(data.tags or [])
    if not tags:
        raise APIError(400, "tags_required", "at least one non-empty tag is required")
    smart_list = await service.create_smart_list(tenant_scope(), data.name.strip(), tags)
    return {"status": "success", "smart_list": smart_list}, 201


@blueprint.get("/smart-lists")
@tag(["Smart Lists"])
@requires(SUB_ACCOUNT)
@validate_response(SmartListPage, 200)
@validate_response(Error, 400)
async def list_smart_lists() -> dict[str, Any]:
    """List smart lists, newest first (general pagination rule)."""
    limit, offset = pagination(request.args)
    items, total = await service.list_smart_lists(tenant_scope(), limit, offset)
    return page_body("smart_lists", items, total, limit, offset)


@blueprint.get("/smart-lists/<smart_list_id>")
@tag(["Smart Lists"])
@requires(SUB_ACCOUNT)
@validate_response(SmartListResponse, 200)
@validate_errors(Error, 400, 404)
async def get_smart_list(smart_list_id: str) -> dict[str, Any]:
    """Read a smart list with the number of contacts in it now."""
    smart_list = await service.get_smart_list(tenant_scope(), parse_uuid(smart_list_id))
    return {"status": "success", "smart_list": smart_list}
