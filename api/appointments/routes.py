"""Appointments under /webhooks/inbound: book, list, read, and PATCH (reschedule, cancel)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from quart import Blueprint, request
from quart_schema import tag, validate_querystring, validate_request

from api.appointments import service
from api.appointments.schemas import (
    EDITABLE,
    AppointmentFilters,
    AppointmentList,
    AppointmentResponse,
    BookAppointmentRequest,
    UpdateAppointmentRequest,
)
from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.calendars.service import invalid
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError

blueprint = Blueprint("appointments", __name__, url_prefix="/webhooks/inbound")


def instant_of(raw: str | None, name: str) -> datetime | None:
    """A filter's ISO 8601 instant (without an offset, UTC); otherwise 400 naming it."""
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw.strip())
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise invalid(name, "must be an ISO 8601 date-time, such as 2026-12-01T09:00:00Z") from None


def _changes(data: UpdateAppointmentRequest) -> service.Changes:
    sent = data.model_fields_set & set(EDITABLE)
    if not sent:
        raise APIError(400, "nothing_to_update", "send at least one of " + ", ".join(EDITABLE))
    for name in ("start", "status"):
        if name in sent and getattr(data, name) is None:
            raise invalid(name, "must not be null")
    if data.start is not None and data.status is not None:
        raise invalid("start", "cannot move an appointment that is being cancelled")
    return service.Changes(
        start=service.parse_start(data.start) if data.start is not None else None,
        cancel=data.status == "cancelled",
        text={name: getattr(data, name) for name in ("title", "notes") if name in sent},
    )


@blueprint.post("/appointments")
@tag(["Appointments"])
@requires(SUB_ACCOUNT)
@validate_request(BookAppointmentRequest)
@validate_response(AppointmentResponse, 201)
@validate_errors(Error, 400, 404, 409)
async def book_appointment(data: BookAppointmentRequest) -> tuple[dict[str, Any], int]:
    """Book a contact into a free slot of a calendar; `start` must be the start of a free slot
    (else 409 slot_unavailable), and the appointment lasts the calendar's slot_minutes."""
    calendar_id = parse_uuid(data.calendar_id, "calendar_id")
    contact_id = parse_uuid(data.contact_id, "contact_id")
    start = service.parse_start(data.start)
    appointment = await service.book(
        tenant_scope(), calendar_id, contact_id, start, title=data.title, notes=data.notes
    )
    return {"status": "success", "appointment": appointment}, 201


@blueprint.get("/appointments")
@tag(["Appointments"])
@requires(SUB_ACCOUNT)
@validate_querystring(AppointmentFilters)
@validate_response(AppointmentList, 200)
@validate_response(Error, 400)
async def list_appointments(query_args: AppointmentFilters) -> dict[str, Any]:
    """List appointments ascending by start, optionally of one calendar, contact or status,
    starting in [from, to). 400 validation_error when `to` is before `from`."""
    limit, offset = pagination(request.args)
    start_from, before = instant_of(query_args.from_, "from"), instant_of(query_args.to, "to")
    if start_from is not None and before is not None and before < start_from:
        raise invalid("to", "must not be before from")
    filters = service.Filters(
        query_args.calendar_id, query_args.contact_id, query_args.status, start_from, before
    )
    appointments, total = await service.list_appointments(tenant_scope(), filters, limit, offset)
    return page_body("appointments", appointments, total, limit, offset)


@blueprint.get("/appointments/<appointment_id>")
@tag(["Appointments"])
@requires(SUB_ACCOUNT)
@validate_response(AppointmentResponse, 200)
@validate_errors(Error, 400, 404)
async def get_appointment(appointment_id: str) -> dict[str, Any]:
    """Read one appointment."""
    appointment = await service.get_appointment(tenant_scope(), parse_uuid(appointment_id))
    return {"status": "success", "appointment": appointment}


@blueprint.patch("/appointments/<appointment_id>")
@tag(["Appointments"])
@requires(SUB_ACCOUNT)
@validate_request(UpdateAppointmentRequest)
@validate_response(AppointmentResponse, 200)
@validate_errors(Error, 400, 404, 409)
async def update_appointment(appointment_id: str, data: UpdateAppointmentRequest) -> dict[str, Any]:
    """Reschedule (a new start that is a free slot, the appointment's own time counting as
    free), retitle, annotate or cancel (`status: cancelled`) a booked appointment; a cancelled
    one is final (409 appointment_cancelled)."""
    appointment_uuid = parse_uuid(appointment_id)
    appointment = await service.update_appointment(tenant_scope(), appointment_uuid, _changes(data))
    return {"status": "success", "appointment": appointment}
