"""Custom fields under /webhooks/inbound: define them and list them."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.custom_fields import service
from api.custom_fields.schemas import (
    CreateCustomFieldRequest,
    CustomFieldList,
    CustomFieldResponse,
)
from api.types import page_body, pagination
from api.validation import validate_response

blueprint = Blueprint("custom_fields", __name__, url_prefix="/webhooks/inbound")


@blueprint.get("/custom-fields")
@tag(["Custom Fields"])
@requires(SUB_ACCOUNT)
@validate_response(CustomFieldList, 200)
async def list_custom_fields() -> dict[str, Any]:
    """List the sub-account's custom fields, newest first."""
    limit, offset = pagination(request.args)
    async with tenant_scope().transaction() as conn:
        items, total = await service.list_custom_fields(conn, limit, offset)
    return page_body("custom_fields", items, total, limit, offset)


@blueprint.post("/custom-fields")
@tag(["Custom Fields"])
@requires(SUB_ACCOUNT)
@validate_request(CreateCustomFieldRequest)
@validate_response(CustomFieldResponse, 201)
async def create_custom_field(data: CreateCustomFieldRequest) -> tuple[dict[str, Any], int]:
    """Define a custom field whose values contacts can carry under its key."""
    async with tenant_scope().transaction() as conn:
        field = await service.create_custom_field(
            conn, data.key, data.name, data.field_type, data.options, data.read_only
        )
    return {"status": "success", "custom_field": field}, 201
