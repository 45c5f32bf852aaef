"""Messages and conversations: send to a contact, read a contact's history, inbound SMS."""

from __future__ import annotations

from typing import Any

import asyncpg
from quart import Blueprint, current_app, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, principal, requires, tenant_scope
from api.contacts.service import valid_phone
from api.conversations import service, signing
from api.conversations.schemas import (
    ContactMessages,
    InboundSms,
    InboundSmsReceived,
    SendMessageRequest,
    SentMessageResponse,
)
from api.schemas import FunctionsError
from api.schemas import InboundError as Error
from api.types import pagination, parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError

blueprint = Blueprint("conversations", __name__)

MAX_MESSAGES_PAGE = 200
MAX_SMS = 1600


def _pool() -> asyncpg.Pool:
    return current_app.config["DB_POOL"]


@blueprint.post("/webhooks/inbound/contacts/<contact_id>/messages")
@tag(["Messages"])
@requires(SUB_ACCOUNT)
@validate_request(SendMessageRequest)
@validate_response(SentMessageResponse, 201)
@validate_errors(Error, 400, 402, 404, 409, 502)
async def send_message(contact_id: str, data: SendMessageRequest) -> tuple[dict[str, Any], int]:
    """Send an SMS or email to the contact, charged to the wallet, kept in its conversation."""
    contact_uuid = parse_uuid(contact_id)
    if data.message_type == "sms" and len(data.content) > MAX_SMS:
        raise APIError(400, "validation_error", f"an sms is at most {MAX_SMS} characters",
                       details=[{"field": "content", "message": f"at most {MAX_SMS} characters",
                                 "type": "too_long"}])
    message = await service.send_to_contact(
        tenant_scope(), principal().organisation_id, contact_uuid,
        service.Outgoing(data.message_type, data.content, data.subject))
    return {"status": "success", "message": message}, 201


@blueprint.get("/functions/v1/crm-api/get-contact-messages/<contact_id>")
@tag(["Conversations"])
@requires(SUB_ACCOUNT)
@validate_response(ContactMessages, 200)
@validate_errors(FunctionsError, 400, 404)
async def get_contact_messages(contact_id: str) -> dict[str, Any]:
    """The contact's messages, newest first (limit 1..200, default 50; offset)."""
    contact_uuid = parse_uuid(contact_id, "contact_id")
    limit, offset = pagination(request.args, maximum=MAX_MESSAGES_PAGE)
    history = await service.contact_messages(tenant_scope(), contact_uuid, limit,
                                             offset)
    return {"success": True, **history}


@blueprint.post("/webhooks/providers/sandbox/sms/<sub_account_id>")
@tag(["Messages"])
@validate_response(InboundSmsReceived, 200)
@validate_errors(Error, 400, 401, 404)
async def sandbox_inbound_sms(sub_account_id: str) -> dict[str, Any]:
    """The sandbox SMS provider's webhook: an inbound text joins the sender's conversation.

    Signed like a carrier callback (`X-Sandbox-Signature`, see api/conversations/signing.py);
    the sub-account is the one the number's webhook URL names.
    """
    sub_account_uuid = parse_uuid(sub_account_id, "sub_account_id")
    raw = await request.get_data(as_text=False)
    assert isinstance(raw, bytes)
    data = signing.signed_body(InboundSms, sub_account_uuid, raw,
                               request.headers.get(signing.HEADER))
    sender = valid_phone(data.from_number)
    if sender is None:
        raise APIError(400, "validation_error", "from must be an E.164 phone number",
                       details=[{"field": "from", "message": "not an E.164 number",
                                 "type": "value_error"}])
    received = await service.receive_sms(_pool(), sub_account_uuid, sender, data.body,
                                         data.message_id)
    return {"status": "success", **received}
