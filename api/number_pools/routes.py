"""POST /number-pools, GET /number-pools and GET /number-pools/{id}."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.number_pools import service
from api.number_pools.schemas import CreatePoolRequest, PoolList, PoolResponse
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("number_pools", __name__, url_prefix="/webhooks/inbound")


@blueprint.post("/number-pools")
@tag(["Number pools"])
@requires(SUB_ACCOUNT)
@validate_request(CreatePoolRequest)
@validate_response(PoolResponse, 201)
@validate_errors(Error, 400, 404)
async def create_number_pool(data: CreatePoolRequest) -> tuple[dict[str, Any], int]:
    """Create a pool of the sub-account's numbers, used round-robin as caller ID."""
    ids = [
        parse_uuid(value, f"phone_number_ids[{index}]")
        for index, value in enumerate(data.phone_number_ids)
    ]
    created = await service.create_pool(tenant_scope(), data.name, ids)
    return {"status": "success", "pool": created}, 201


@blueprint.get("/number-pools")
@tag(["Number pools"])
@requires(SUB_ACCOUNT)
@validate_response(PoolList, 200)
@validate_response(Error, 400)
async def list_number_pools() -> dict[str, Any]:
    """List number pools, newest first, each with its active numbers in round-robin order."""
    limit, offset = pagination(request.args)
    pools, total = await service.list_pools(tenant_scope(), limit, offset)
    return page_body("number_pools", pools, total, limit, offset)


@blueprint.get("/number-pools/<pool_id>")
@tag(["Number pools"])
@requires(SUB_ACCOUNT)
@validate_response(PoolResponse, 200)
@validate_errors(Error, 400, 404)
async def get_number_pool(pool_id: str) -> dict[str, Any]:
    """Read a pool and its active numbers in round-robin order."""
    found = await service.get_pool(tenant_scope(), parse_uuid(pool_id))
    return {"status": "success", "pool": found}
