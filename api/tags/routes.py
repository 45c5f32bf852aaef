"""Tags under /webhooks/inbound: the tag summary, and adding and removing a contact's tags."""

from __future__ import annotations

from typing import Any

from quart import Blueprint
from quart_schema import tag

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.contacts.body import validate_optional_body
from api.contacts.service import normalise_tags
from api.schemas import InboundError as Error
from api.tags import service
from api.tags.schemas import TagsAdded, TagsRemoved, TagsRequest, TagSummary
from api.types import parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError

blueprint = Blueprint("tags", __name__, url_prefix="/webhooks/inbound")


def requested_tags(data: TagsRequest) -> list[str]:
    tags = normalise_tags(([data.tag] if data.tag is not None else []) + (data.tags or []))
    if not tags:
        raise APIError(400, "tags_required", "give at least one non-empty tag (tag or tags)")
    return tags


@blueprint.get("/tags")
@tag(["Tags"])
@requires(SUB_ACCOUNT)
@validate_response(TagSummary, 200)
async def list_tags() -> dict[str, Any]:
    """The tags carried by the newest 5000 contacts, with counts, sorted A to Z."""
    tags = await service.tag_summary(tenant_scope())
    return {"status": "success", "tag_count": len(tags), "tags": tags}


@blueprint.post("/contacts/<contact_id>/tags")
@tag(["Tags"])
@requires(SUB_ACCOUNT)
@validate_optional_body(TagsRequest)
@validate_response(TagsAdded, 200)
@validate_errors(Error, 400, 404)
async def add_tags(contact_id: str, data: TagsRequest) -> dict[str, Any]:
    """Merge tags into a contact's set; contact.updated fires only when the set changes."""
    contact_uuid = parse_uuid(contact_id)
    tags = requested_tags(data)
    result = await service.add_tags(tenant_scope(), contact_uuid, tags)
    return {"status": "success", "contact_id": contact_uuid, "tags": result, "added": tags}


@blueprint.delete("/contacts/<contact_id>/tags")
@tag(["Tags"])
@requires(SUB_ACCOUNT)
@validate_optional_body(TagsRequest)
@validate_response(TagsRemoved, 200)
@validate_errors(Error, 400, 404)
async def remove_tags(contact_id: str, data: TagsRequest) -> dict[str, Any]:
    """Remove tags from a contact (case-insensitive); tags it does not carry are ignored."""
    contact_uuid = parse_uuid(contact_id)
    tags = requested_tags(data)
    remaining, removed = await service.remove_tags(tenant_scope(), contact_uuid, tags)
    return {"status": "success", "contact_id": contact_uuid, "tags": remaining, "removed": removed}
