"""Calendars under /webhooks/inbound: create, list, read, PATCH, DELETE and free slots."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from quart import Blueprint, request
from quart_schema import document_querystring, tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.calendars import service
from api.calendars.schemas import (
    DATE_PATTERN,
    CalendarDeleted,
    CalendarList,
    CalendarResponse,
    CreateCalendarRequest,
    FreeSlots,
    FreeSlotsQuery,
    UpdateCalendarRequest,
)
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("calendars", __name__, url_prefix="/webhooks/inbound")

DAY = re.compile(DATE_PATTERN)


def _day(args: Any, name: str) -> date:
    raw = args.get(name)
    if raw is None:
        raise service.invalid(name, "is required (a day, YYYY-MM-DD)")
    if not DAY.fullmatch(raw):
        raise service.invalid(name, "must be a day in the form YYYY-MM-DD")
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise service.invalid(name, "must be a real calendar day (YYYY-MM-DD)") from None


@blueprint.post("/calendars")
@tag(["Calendars"])
@requires(SUB_ACCOUNT)
@validate_request(CreateCalendarRequest)
@validate_response(CalendarResponse, 201)
@validate_response(Error, 400)
async def create_calendar(data: CreateCalendarRequest) -> tuple[dict[str, Any], int]:
    """Create a calendar: bookable wall-clock hours in a timezone, cut into slots.

    400 validation_error for an availability window whose end is not after its start."""
    calendar = await service.create_calendar(tenant_scope(), data)
    return {"status": "success", "calendar": calendar}, 201


@blueprint.get("/calendars")
@tag(["Calendars"])
@requires(SUB_ACCOUNT)
@validate_response(CalendarList, 200)
@validate_response(Error, 400)
async def list_calendars() -> dict[str, Any]:
    """List the sub-account's calendars, newest first."""
    limit, offset = pagination(request.args)
    calendars, total = await service.list_calendars(tenant_scope(), limit, offset)
    return page_body("calendars", calendars, total, limit, offset)


@blueprint.get("/calendars/<calendar_id>")
@tag(["Calendars"])
@requires(SUB_ACCOUNT)
@validate_response(CalendarResponse, 200)
@validate_errors(Error, 400, 404)
async def get_calendar(calendar_id: str) -> dict[str, Any]:
    """Read one calendar."""
    calendar = await service.get_calendar(tenant_scope(), parse_uuid(calendar_id))
    return {"status": "success", "calendar": calendar}


@blueprint.patch("/calendars/<calendar_id>")
@tag(["Calendars"])
@requires(SUB_ACCOUNT)
@validate_request(UpdateCalendarRequest)
@validate_response(CalendarResponse, 200)
@validate_errors(Error, 400, 404)
async def update_calendar(calendar_id: str, data: UpdateCalendarRequest) -> dict[str, Any]:
    """Change only the fields sent; appointments already booked keep their times.

    400 validation_error for an availability window whose end is not after its start."""
    calendar = await service.update_calendar(tenant_scope(), parse_uuid(calendar_id), data)
    return {"status": "success", "calendar": calendar}


@blueprint.delete("/calendars/<calendar_id>")
@tag(["Calendars"])
@requires(SUB_ACCOUNT)
@validate_response(CalendarDeleted, 200)
@validate_errors(Error, 400, 404, 409)
async def delete_calendar(calendar_id: str) -> dict[str, Any]:
    """Delete a calendar (with its past and cancelled appointments); 409 calendar_in_use while
    it has booked appointments still to come."""
    calendar_uuid = parse_uuid(calendar_id)
    await service.delete_calendar(tenant_scope(), calendar_uuid)
    return {"status": "success", "deleted": True, "calendar_id": calendar_uuid}


@blueprint.get("/calendars/<calendar_id>/free-slots")
@tag(["Calendars"])
@requires(SUB_ACCOUNT)
@document_querystring(FreeSlotsQuery)
@validate_response(FreeSlots, 200)
@validate_errors(Error, 400, 404)
async def free_slots(calendar_id: str) -> dict[str, Any]:
    """The free slots starting on the days from..to (in the calendar's timezone, at most 31),
    ascending: each window's start plus whole steps of slot + buffer, wholly inside the window,
    min_notice_minutes to max_days_ahead x 24 h after now, buffer_minutes clear of every booked
    appointment. Local times skipped by a daylight-saving change are no slot; a repeated one
    counts at its first occurrence. At most 2,000 slots, earliest first; `truncated` says the
    days held more. 400 validation_error when `to` is before `from` or more than 31 days after
    it."""
    calendar_uuid = parse_uuid(calendar_id)
    from_day, to_day = _day(request.args, "from"), _day(request.args, "to")
    body = await service.list_free_slots(tenant_scope(), calendar_uuid, from_day, to_day)
    return {"status": "success", **body}
