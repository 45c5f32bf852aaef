"""Contacts under /webhooks/inbound: list, create-or-match, read, update, delete."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request
from quart_schema import tag, validate_querystring

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.contacts import service
from api.contacts.body import validate_optional_body
from api.contacts.schemas import (
    ContactCreated,
    ContactDeleted,
    ContactFilters,
    ContactList,
    ContactResponse,
    ContactUpdated,
    CreateContactRequest,
    UpdateContactRequest,
)
from api.schemas import InboundError as Error
from api.types import offset_arg, page_body, parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("contacts", __name__, url_prefix="/webhooks/inbound")

DEFAULT_LIMIT = 50
MAX_LIMIT = 100


def contacts_page(args: Any) -> tuple[int, int]:
    """GET /contacts's own rule: limit over 100 is 100, a missing or unusable one is 50."""
    try:
        limit = int(args.get("limit", ""))
    except ValueError:
        limit = DEFAULT_LIMIT
    limit = DEFAULT_LIMIT if limit < 1 else min(limit, MAX_LIMIT)
    return limit, offset_arg(args)


@blueprint.get("/contacts")
@tag(["Contacts"])
@requires(SUB_ACCOUNT)
@validate_querystring(ContactFilters)
@validate_response(ContactList, 200)
@validate_response(Error, 400)
async def list_contacts(query_args: ContactFilters) -> dict[str, Any]:
    """List contacts, newest first; q, email, phone and tag narrow it (all must hold).

    400 validation_error for a `phone` that no country assigns (libphonenumber)."""
    conditions = service.search_conditions(
        query_args.q, query_args.email, query_args.phone, query_args.tag
    )
    limit, offset = contacts_page(request.args)
    contacts, total = await service.list_contacts(tenant_scope(), conditions, limit, offset)
    return page_body("contacts", contacts, total, limit, offset)


@blueprint.post("/contacts")
@tag(["Contacts"])
@requires(SUB_ACCOUNT)
@validate_optional_body(CreateContactRequest)
@validate_response(ContactCreated, 201)
@validate_response(ContactCreated, 200)
@validate_errors(Error, 400, 409)
async def create_contact(data: CreateContactRequest) -> tuple[dict[str, Any], int]:
    """Create a contact, or match one by email, then phone, and update it.

    400 validation_error for a phone that no country assigns (libphonenumber), a custom field
    key that does not exist, or an assigned_user_id that is no member of the sub-account."""
    created, contact_id = await service.create_or_match(tenant_scope(), data)
    return {"status": "success", "created": created, "contact_id": contact_id}, (
        201 if created else 200
    )


@blueprint.get("/contacts/<contact_id>")
@tag(["Contacts"])
@requires(SUB_ACCOUNT)
@validate_response(ContactResponse, 200)
@validate_errors(Error, 400, 404)
async def get_contact(contact_id: str) -> dict[str, Any]:
    """Read one contact."""
    contact = await service.get_contact(tenant_scope(), parse_uuid(contact_id))
    return {"status": "success", "contact": contact}


@blueprint.patch("/contacts/<contact_id>")
@tag(["Contacts"])
@requires(SUB_ACCOUNT)
@validate_optional_body(UpdateContactRequest)
@validate_response(ContactUpdated, 200)
@validate_errors(Error, 400, 404, 409)
async def update_contact(contact_id: str, data: UpdateContactRequest) -> dict[str, Any]:
    """Change only the fields present; tags replaces the whole set.

    400 validation_error for a phone that no country assigns (libphonenumber), a custom field
    key that does not exist, or an assigned_user_id that is no member of the sub-account."""
    contact_uuid = parse_uuid(contact_id)
    await service.update_contact(tenant_scope(), contact_uuid, data)
    return {"status": "success", "updated": True, "contact_id": contact_uuid}


@blueprint.delete("/contacts/<contact_id>")
@tag(["Contacts"])
@requires(SUB_ACCOUNT)
@validate_response(ContactDeleted, 200)
@validate_errors(Error, 400, 404, 409)
async def delete_contact(contact_id: str) -> dict[str, Any]:
    """Delete a contact and its notes; refused while other records reference it."""
    contact_uuid = parse_uuid(contact_id)
    await service.delete_contact(tenant_scope(), contact_uuid)
    return {"status": "success", "deleted": True, "contact_id": contact_uuid}
