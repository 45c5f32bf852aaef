"""Phone numbers: list, read, purchase, import, assign to an agent and unassign, release."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.contacts.body import validate_optional_body
from api.phone_numbers import service
from api.phone_numbers.schemas import (
    Assigned,
    AssignRequest,
    ImportRequest,
    PhoneNumberList,
    PhoneNumberResponse,
    PurchaseRequest,
    Released,
    Unassigned,
)
from api.schemas import InboundError as Error
from api.types import parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("phone_numbers", __name__, url_prefix="/webhooks/inbound")


def _arq() -> Any:
    return current_app.config["ARQ"]


@blueprint.get("/phone-numbers")
@tag(["Phone numbers"])
@requires(SUB_ACCOUNT)
@validate_response(PhoneNumberList, 200)
async def list_phone_numbers() -> dict[str, Any]:
    """List the active phone numbers, ordered by number."""
    numbers = await service.list_numbers(tenant_scope())
    return {"status": "success", "phone_number_count": len(numbers), "phone_numbers": numbers}


@blueprint.get("/phone-numbers/<number_id>")
@tag(["Phone numbers"])
@requires(SUB_ACCOUNT)
@validate_response(PhoneNumberResponse, 200)
@validate_errors(Error, 400, 404)
async def get_phone_number(number_id: str) -> dict[str, Any]:
    """Read one phone number."""
    number = await service.get_number(tenant_scope(), parse_uuid(number_id))
    return {"status": "success", "phone_number": number}


@blueprint.post("/phone-numbers/purchase")
@tag(["Phone Number Purchasing"])
@requires(SUB_ACCOUNT)
@validate_optional_body(PurchaseRequest)
@validate_response(PhoneNumberResponse, 201)
@validate_errors(Error, 400, 402, 409, 502)
async def purchase_phone_number(data: PurchaseRequest) -> tuple[dict[str, Any], int]:
    """Buy a number from the carrier; the first month is charged to the wallet."""
    number = await service.purchase(tenant_scope(), _arq(), data.area_code)
    return {"status": "success", "phone_number": number}, 201


@blueprint.post("/phone-numbers/import")
@tag(["Phone Number Purchasing"])
@requires(SUB_ACCOUNT)
@validate_request(ImportRequest)
@validate_response(PhoneNumberResponse, 201)
@validate_errors(Error, 400, 409, 502)
async def import_phone_number(data: ImportRequest) -> tuple[dict[str, Any], int]:
    """Import a number the sub-account already holds elsewhere (not billed).

    400 validation_error for a number that no country assigns (libphonenumber)."""
    number = await service.import_number(tenant_scope(), _arq(), data.phone_number)
    return {"status": "success", "phone_number": number}, 201


@blueprint.post("/phone-numbers/<number_id>/agent")
@tag(["Phone numbers"])
@requires(SUB_ACCOUNT)
@validate_request(AssignRequest)
@validate_response(Assigned, 200)
@validate_errors(Error, 400, 404, 409, 502)
async def assign_phone_number(number_id: str, data: AssignRequest) -> dict[str, Any]:
    """Assign the number to an agent so that inbound calls route to it."""
    number_uuid = parse_uuid(number_id)
    agent_id = parse_uuid(data.agent_id, "agent_id")
    result = await service.assign(tenant_scope(), _arq(), number_uuid, agent_id)
    return {"status": "success", **result}


@blueprint.delete("/phone-numbers/<number_id>/agent")
@tag(["Phone numbers"])
@requires(SUB_ACCOUNT)
@validate_response(Unassigned, 200)
@validate_errors(Error, 400, 404, 502)
async def unassign_phone_number(number_id: str) -> dict[str, Any]:
    """Take the number from its agent: inbound calls stop reaching it."""
    result = await service.unassign(tenant_scope(), _arq(), parse_uuid(number_id))
    return {"status": "success", **result}


@blueprint.delete("/phone-numbers/<number_id>")
@tag(["Phone numbers"])
@requires(SUB_ACCOUNT)
@validate_response(Released, 200)
@validate_errors(Error, 400, 404, 502)
async def release_phone_number(number_id: str) -> dict[str, Any]:
    """Release a number permanently; any assigned agent loses it at once."""
    result = await service.release(tenant_scope(), _arq(), parse_uuid(number_id))
    return {"status": "success", **result}
