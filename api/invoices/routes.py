"""Invoices under /webhooks/inbound: create, read, PATCH, payment link and mark paid."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app, request
from quart_schema import tag, validate_querystring, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.invoices import service
from api.invoices.schemas import (
    CreateInvoiceRequest,
    InvoiceFilters,
    InvoiceList,
    InvoiceResponse,
    MarkPaidRequest,
    UpdatedInvoiceResponse,
    UpdateInvoiceRequest,
)
from api.schemas import InboundError as ErrorResponse
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("invoices", __name__, url_prefix="/webhooks/inbound")


@blueprint.post("/invoices")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_request(CreateInvoiceRequest)
@validate_response(InvoiceResponse, 201)
@validate_errors(ErrorResponse, 400, 404)
async def create_invoice(data: CreateInvoiceRequest) -> tuple[dict[str, Any], int]:
    """Create a pending invoice for a contact, numbered INV-000001 onwards per sub-account.

    400 validation_error when the items' total is over the cap."""
    invoice = await service.create_invoice(tenant_scope(), data)
    return {"status": "success", "invoice": invoice}, 201


@blueprint.get("/invoices")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_querystring(InvoiceFilters)
@validate_response(InvoiceList, 200)
@validate_response(ErrorResponse, 400)
async def list_invoices(query_args: InvoiceFilters) -> dict[str, Any]:
    """List invoices, newest first, optionally of one status or one contact."""
    limit, offset = pagination(request.args)
    invoices, total = await service.list_invoices(
        tenant_scope(), query_args.status, query_args.contact_id, limit, offset
    )
    return page_body("invoices", invoices, total, limit, offset)


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
    """Change only the fields sent; a changed amount clears the payment link.

    400 validation_error when the items' total is over the cap."""
    invoice, cleared = await service.update_invoice(tenant_scope(), parse_uuid(invoice_id), data)
    return {"status": "success", "invoice": invoice, "payment_link_cleared": cleared}


@blueprint.post("/invoices/<invoice_id>/payment-link")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_response(InvoiceResponse, 200)
@validate_errors(ErrorResponse, 400, 404, 409)
async def create_payment_link(invoice_id: str) -> dict[str, Any]:
    """Issue a payment link for a pending invoice (replacing any earlier link)."""
    invoice = await service.create_payment_link(
        tenant_scope(), parse_uuid(invoice_id), current_app.config["SETTINGS"].public_url
    )
    return {"status": "success", "invoice": invoice}


@blueprint.post("/invoices/<invoice_id>/mark-paid")
@tag(["Invoices"])
@requires(SUB_ACCOUNT)
@validate_request(MarkPaidRequest)
@validate_response(InvoiceResponse, 200)
@validate_errors(ErrorResponse, 400, 404, 409)
async def mark_paid(invoice_id: str, data: MarkPaidRequest) -> dict[str, Any]:
    """Record the payment of a pending invoice: it becomes paid, with paid_at set."""
    invoice = await service.mark_paid(
        tenant_scope(), parse_uuid(invoice_id), data.payment_method.strip()
    )
    return {"status": "success", "invoice": invoice}
