"""Companies under /webhooks/inbound: create them and list them."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.companies import service
from api.companies.schemas import CompanyList, CompanyResponse, CreateCompanyRequest
from api.types import page_body, pagination
from api.validation import validate_response

blueprint = Blueprint("companies", __name__, url_prefix="/webhooks/inbound")


@blueprint.get("/companies")
@tag(["Companies"])
@requires(SUB_ACCOUNT)
@validate_response(CompanyList, 200)
async def list_companies() -> dict[str, Any]:
    """List the sub-account's companies, newest first."""
    limit, offset = pagination(request.args)
    async with tenant_scope().transaction() as conn:
        items, total = await service.list_companies(conn, limit, offset)
    return page_body("companies", items, total, limit, offset)


@blueprint.post("/companies")
@tag(["Companies"])
@requires(SUB_ACCOUNT)
@validate_request(CreateCompanyRequest)
@validate_response(CompanyResponse, 201)
async def create_company(data: CreateCompanyRequest) -> tuple[dict[str, Any], int]:
    """Create a company that contacts can be linked to by company_id."""
    async with tenant_scope().transaction() as conn:
        company = await service.create_company(conn, data.name)
    return {"status": "success", "company": company}, 201
