"""Messages and conversations: send to a contact, read a contact's history and its
conversation, inbound SMS and delivery reports from the carriers."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from quart import Blueprint, Response, current_app, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, db_pool, principal, requires, tenant_scope
from api.contacts.service import valid_phone
from api.conversations import inbound, service, signing, threads
from api.conversations.schemas import (
    ContactMessages,
    ConversationList,
    ConversationMessages,
    ConversationUpdated,
    InboundSms,
    InboundSmsReceived,
    SendMessageRequest,
    SentMessageResponse,
    UpdateConversationRequest,
)
from api.schemas import FunctionsError
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from integrations.telephony.twilio import SIGNATURE_HEADER, signature_valid
from tenancy.errors import APIError
from tenancy.scope import TenantScope

blueprint = Blueprint("conversations", __name__)

MAX_MESSAGES_PAGE = 200
MAX_SMS = service.MAX_SMS
CONVERSATIONS = "/webhooks/inbound/conversations"
TWILIO_WEBHOOKS = "/webhooks/providers/twilio"
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>'


@blueprint.post("/webhooks/inbound/contacts/<contact_id>/messages")
@tag(["Messages"])
@requires(SUB_ACCOUNT)
@validate_request(SendMessageRequest)
@validate_response(SentMessageResponse, 201)
@validate_errors(Error, 400, 402, 404, 409, 502)
async def send_message(contact_id: str, data: SendMessageRequest) -> tuple[dict[str, Any], int]:
    """Send an SMS or email to the contact, charged to the wallet, kept in its conversation;
    with `send_at`, kept `scheduled` and sent (and charged) then. 400 when the contact has no
    email (an email) or phone (an SMS) on file."""
    contact_uuid = parse_uuid(contact_id)
    if data.message_type == "sms" and len(data.content) > MAX_SMS:
        raise APIError(
            400,
            "validation_error",
            f"an sms is at most {MAX_SMS} characters",
            details=[
                {"field": "content", "message": f"at most {MAX_SMS} characters", "type": "too_long"}
            ],
        )
    outgoing = service.Outgoing(data.message_type, data.content, data.subject)
    if data.send_at is not None:
        message = await service.schedule_to_contact(
            tenant_scope(), principal().organisation_id, contact_uuid, outgoing, data.send_at
        )
    else:
        message = await service.send_to_contact(
            tenant_scope(), principal().organisation_id, contact_uuid, outgoing
        )
    return {"status": "success", "message": message}, 201


@blueprint.post("/webhooks/inbound/messages/<message_id>/cancel")
@tag(["Scheduled Messages"])
@requires(SUB_ACCOUNT)
@validate_response(SentMessageResponse, 200)
@validate_errors(Error, 400, 404, 409)
async def cancel_message(message_id: str) -> dict[str, Any]:
    """Cancel a scheduled message before it is sent (409 `not_cancellable` once it started)."""
    message = await service.cancel_message(tenant_scope(), parse_uuid(message_id))
    return {"status": "success", "message": message}


@blueprint.get("/functions/v1/crm-api/get-contact-messages/<contact_id>")
@tag(["Conversations"])
@requires(SUB_ACCOUNT)
@validate_response(ContactMessages, 200)
@validate_errors(FunctionsError, 400, 404)
async def get_contact_messages(contact_id: str) -> dict[str, Any]:
    """The contact's messages, newest first (limit 1..200, default 50; offset)."""
    contact_uuid = parse_uuid(contact_id, "contact_id")
    limit, offset = pagination(request.args, maximum=MAX_MESSAGES_PAGE)
    history = await service.contact_messages(tenant_scope(), contact_uuid, limit, offset)
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
    data = signing.signed_body(
        InboundSms, sub_account_uuid, raw, request.headers.get(signing.HEADER)
    )
    sender = valid_phone(data.from_number)
    if sender is None:
        raise APIError(
            400,
            "validation_error",
            "from must be an E.164 phone number",
            details=[{"field": "from", "message": "not an E.164 number", "type": "value_error"}],
        )
    scope = await TenantScope.of_active_or_404(db_pool(), sub_account_uuid)
    received = await inbound.receive(
        scope, inbound.InboundText(sender, valid_phone(data.to or ""), data.body, data.message_id)
    )
    return {
        "status": "success",
        "message_id": received.message["id"],
        "conversation_id": received.message["conversation_id"],
        "contact_id": received.contact_id,
        "duplicate": received.duplicate,
    }


# --- Twilio's webhooks ------------------------------------------------------------------------


async def _twilio_fields() -> dict[str, str]:
    """The form Twilio posted, once its X-Twilio-Signature checks out against TWILIO_AUTH_TOKEN
    and the URL it was given (SWITCHBOARD_PUBLIC_URL + this path); else 401. NUL characters
    are dropped from the values."""
    raw = await request.get_data(as_text=False)
    assert isinstance(raw, bytes)
    params = parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)
    settings = current_app.config["SETTINGS"]
    url = settings.public_url.rstrip("/") + request.path
    if request.query_string:
        url += "?" + request.query_string.decode("utf-8", "replace")
    if not signature_valid(
        settings.twilio_auth_token, [url], params, request.headers.get(SIGNATURE_HEADER)
    ):
        raise APIError(401, "invalid_signature", "the provider signature is missing or wrong")
    # PostgreSQL text cannot hold NUL; the signature was checked over what Twilio sent.
    return {name: value.replace("\x00", "") for name, value in params}


def _twiml() -> Response:
    return Response(EMPTY_TWIML, status=200, content_type="text/xml; charset=utf-8")


@blueprint.post(f"{TWILIO_WEBHOOKS}/sms")
@tag(["Messages"])
@validate_errors(Error, 401)
async def twilio_inbound_sms() -> Response:
    """Twilio's incoming-message webhook: the text joins the sender's conversation in the
    sub-account holding the `To` number; answered with empty TwiML."""
    fields = await _twilio_fields()
    sender, body, sid = (
        valid_phone(fields.get("From", "")),
        fields.get("Body", ""),
        fields.get("MessageSid", ""),
    )
    number = valid_phone(fields.get("To", ""))
    if sender is not None and number is not None and 0 < len(sid) <= 200:
        await inbound.receive_twilio(db_pool(), inbound.InboundText(sender, number, body, sid))
    return _twiml()


@blueprint.post(f"{TWILIO_WEBHOOKS}/status")
@tag(["Messages"])
@validate_errors(Error, 401)
async def twilio_message_status() -> Response:
    """Twilio's message status callback: the outbound message's delivery_status moves forward
    (late, repeated or backward reports change nothing). `ref`, which our StatusCallback URL
    carries under Twilio's signature, names the sub-account that sent the message."""
    fields = await _twilio_fields()
    report = inbound.TwilioStatusReport(
        message_sid=fields.get("MessageSid", ""),
        message_status=fields.get("MessageStatus", ""),
        from_number=fields.get("From", ""),
        error_code=fields.get("ErrorCode") or None,
    )
    await inbound.record_twilio_status(db_pool(), report, request.args.get("ref"))
    return _twiml()


# --- conversations ----------------------------------------------------------------------------


def _unread_filter(raw: str | None) -> bool:
    if raw in (None, "false"):
        return False
    if raw == "true":
        return True
    raise APIError(
        400,
        "validation_error",
        "unread must be true or false",
        details=[{"field": "unread", "message": "must be true or false", "type": "bool_parsing"}],
    )


@blueprint.get(CONVERSATIONS)
@tag(["Conversations"])
@requires(SUB_ACCOUNT)
@validate_response(ConversationList, 200)
@validate_errors(Error, 400)
async def list_conversations() -> dict[str, Any]:
    """The sub-account's conversations, latest message first (filters contact_id, unread)."""
    contact = request.args.get("contact_id")
    contact_id = parse_uuid(contact, "contact_id") if contact is not None else None
    unread = _unread_filter(request.args.get("unread"))
    limit, offset = pagination(request.args)
    items, total = await threads.list_conversations(
        tenant_scope(), contact_id, unread, limit, offset
    )
    return page_body("conversations", items, total, limit, offset)


@blueprint.get(f"{CONVERSATIONS}/<conversation_id>/messages")
@tag(["Conversations"])
@requires(SUB_ACCOUNT)
@validate_response(ConversationMessages, 200)
@validate_errors(Error, 400, 404)
async def list_conversation_messages(conversation_id: str) -> dict[str, Any]:
    """The conversation's messages, newest first, with direction and delivery_status."""
    conversation_uuid = parse_uuid(conversation_id, "conversation_id")
    limit, offset = pagination(request.args)
    items, total = await threads.conversation_messages(
        tenant_scope(), conversation_uuid, limit, offset
    )
    return page_body("messages", items, total, limit, offset)


@blueprint.patch(f"{CONVERSATIONS}/<conversation_id>")
@tag(["Conversations"])
@requires(SUB_ACCOUNT)
@validate_request(UpdateConversationRequest)
@validate_response(ConversationUpdated, 200)
@validate_errors(Error, 400, 404)
async def update_conversation(
    conversation_id: str, data: UpdateConversationRequest
) -> dict[str, Any]:
    """Mark the conversation read: `{unread: false}` marks every inbound message read."""
    conversation = await threads.mark_read(
        tenant_scope(), parse_uuid(conversation_id, "conversation_id")
    )
    return {"status": "success", "conversation": conversation}
