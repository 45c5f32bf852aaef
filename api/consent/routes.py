"""A contact's consent per channel under /webhooks/inbound: read it, set one channel."""

from __future__ import annotations

from typing import Any

from quart import Blueprint
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.consent import service
from api.consent.schemas import ConsentResponse, PutConsentRequest
from api.schemas import InboundError as Error
from api.types import parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("consent", __name__, url_prefix="/webhooks/inbound")


@blueprint.get("/contacts/<contact_id>/consent")
@tag(["Contacts"])
@requires(SUB_ACCOUNT)
@validate_response(ConsentResponse, 200)
@validate_errors(Error, 400, 404)
async def get_consent(contact_id: str) -> dict[str, Any]:
    """The contact's consent to sms, email and calls (`unknown` where never set)."""
    contact_uuid = parse_uuid(contact_id)
    consent = await service.get_consent(tenant_scope(), contact_uuid)
    return {"status": "success", "contact_id": contact_uuid, "consent": consent}


@blueprint.put("/contacts/<contact_id>/consent")
@tag(["Contacts"])
@requires(SUB_ACCOUNT)
@validate_request(PutConsentRequest)
@validate_response(ConsentResponse, 200)
@validate_errors(Error, 400, 404)
async def put_consent(contact_id: str, data: PutConsentRequest) -> dict[str, Any]:
    """Grant or revoke one channel; a change fires contact.consent_updated."""
    contact_uuid = parse_uuid(contact_id)
    consent = await service.put_consent(
        tenant_scope(), contact_uuid, data.channel, data.status, data.source or "api"
    )
    return {"status": "success", "contact_id": contact_uuid, "consent": consent}
