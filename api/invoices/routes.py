"""Invoices under /webhooks/inbound: create, read, PATCH, payment link and mark paid."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.invoices import service
from api.invoices.schemas import (
    CreateInvoiceRequest,
    InvoiceResponse,
    MarkPaidRequest,
    UpdatedInvoiceResponse,
    UpdateInvoiceRequest,
)
from api.schemas import InboundError as ErrorResponse
from api.types import parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError

blueprint = Blueprint("invoices", __name__, url_prefix="/webhooks/inbound")

NOT_NULL = ("contact_id", "items", "due_date", "status")


def _changes(data: UpdateInvoiceRequest) -> dict[str, Any]:
    """The fields the body sent, with ids parsed; null only where the spec allows it."""
    sent = data.model_dump(include=data.model_fields_set & set(service.EDITABLE))
    nulls = [field for field in NOT_NULL if field in sent and sent[field] is None]
    if nulls:
        raise APIError(400, "validation_error", "invalid request",
                       details=[{"field": field, "message": "must not be null", "type": "null"}
                                for field in nulls])
    if "contact_id" in sent:
        sent["contact_id"] = parse_uuid(sent["contact_id"], "contact_id")
    return sent


@blueprint.post("/invoices")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_request(CreateInvoiceRequest)
@validate_response(InvoiceResponse, 201)
@validate_errors(ErrorResponse, 400, 404)
async def create_invoice(data: CreateInvoiceRequest) -> tuple[dict[str, Any], int]:
    """Create a pending invoice for a contact, numbered INV-000001 onwards per sub-account."""
    contact_id = parse_uuid(data.contact_id, "contact_id")
    quote_id = parse_uuid(data.quote_id, "quote_id") if data.quote_id is not None else None
    items = [item.model_dump() for item in data.items]
    invoice = await service.create_invoice(tenant_scope(), contact_id, items,
                                           data.due_date, data.notes, quote_id)
    return {"status": "success", "invoice": invoice}, 201


@blueprint.get("/invoices/<invoice_id>")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_response(InvoiceResponse, 200)
@validate_errors(ErrorResponse, 400, 404)
async def get_invoice(invoice_id: str) -> dict[str, Any]:
    """Read one invoice."""
    invoice = await service.get_invoice(tenant_scope(), parse_uuid(invoice_id))
    return {"status": "success", "invoice": invoice}


@blueprint.patch("/invoices/<invoice_id>")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_request(UpdateInvoiceRequest)
@validate_response(UpdatedInvoiceResponse, 200)
@validate_errors(ErrorResponse, 400, 404, 409)
async def update_invoice(invoice_id: str, data: UpdateInvoiceRequest) -> dict[str, Any]:
    """Change only the fields sent; a changed amount clears the payment link."""
    parsed_id = parse_uuid(invoice_id)
    invoice, cleared = await service.update_invoice(tenant_scope(), parsed_id,
                                                    _changes(data))
    return {"status": "success", "invoice": invoice, "payment_link_cleared": cleared}


@blueprint.post("/invoices/<invoice_id>/payment-link")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_response(InvoiceResponse, 200)
@validate_errors(ErrorResponse, 400, 404, 409)
async def create_payment_link(invoice_id: str) -> dict[str, Any]:
    """Issue a payment link for a pending invoice (replacing any earlier link)."""
    invoice = await service.create_payment_link(tenant_scope(), parse_uuid(invoice_id),
        current_app.config["SETTINGS"].public_url)
    return {"status": "success", "invoice": invoice}


@blueprint.post("/invoices/<invoice_id>/mark-paid")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_request(MarkPaidRequest)
@validate_response(InvoiceResponse, 200)
@validate_errors(ErrorResponse, 400, 404, 409)
async def mark_paid(invoice_id: str, data: MarkPaidRequest) -> dict[str, Any]:
    """Record the payment of a pending invoice: it becomes paid, with paid_at set."""
    invoice = await service.mark_paid(tenant_scope(), parse_uuid(invoice_id),
                                      data.payment_method.strip())
    return {"status": "success", "invoice": invoice}
