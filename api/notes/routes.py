"""Notes under /webhooks/inbound/contacts/{id}/notes: create, list, soft-delete."""

from __future__ import annotations

from typing import Any

from quart import Blueprint
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.notes import service
from api.notes.schemas import CreateNoteRequest, NoteCreated, NoteDeleted, NoteList
from api.schemas import InboundError as Error
from api.types import parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("notes", __name__, url_prefix="/webhooks/inbound")


@blueprint.post("/contacts/<contact_id>/notes")
@tag(["Notes"])
@requires(SUB_ACCOUNT)
@validate_request(CreateNoteRequest)
@validate_response(NoteCreated, 201)
@validate_errors(Error, 400, 404)
async def create_note(contact_id: str, data: CreateNoteRequest) -> tuple[dict[str, Any], int]:
    """Add a note to a contact (kept locally, not mirrored to external CRMs)."""
    note = await service.create_note(tenant_scope(), parse_uuid(contact_id), data.content)
    return {"status": "success", "note": note}, 201


@blueprint.get("/contacts/<contact_id>/notes")
@tag(["Notes"])
@requires(SUB_ACCOUNT)
@validate_response(NoteList, 200)
@validate_errors(Error, 400, 404)
async def list_notes(contact_id: str) -> dict[str, Any]:
    """List a contact's active notes, newest first."""
    contact_uuid = parse_uuid(contact_id)
    notes = await service.list_notes(tenant_scope(), contact_uuid)
    return {
        "status": "success",
        "contact_id": contact_uuid,
        "note_count": len(notes),
        "notes": notes,
    }


@blueprint.delete("/contacts/<contact_id>/notes/<note_id>")
@tag(["Notes"])
@requires(SUB_ACCOUNT)
@validate_response(NoteDeleted, 200)
@validate_errors(Error, 400, 404)
async def delete_note(contact_id: str, note_id: str) -> dict[str, Any]:
    """Soft-delete a note of the contact."""
    contact_uuid, note_uuid = parse_uuid(contact_id), parse_uuid(note_id, "noteId")
    await service.delete_note(tenant_scope(), contact_uuid, note_uuid)
    return {"status": "success", "deleted": True, "contact_id": contact_uuid, "note_id": note_uuid}
