"""Campaigns under /webhooks/inbound: create (draft), read, schedule, cancel, resume, and the
recipients of one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from quart import Blueprint, request
from quart_schema import tag, validate_querystring, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.campaigns import service
from api.campaigns.schemas import (
    CALL_FIELDS,
    MAX_SMS_CONTENT,
    MESSAGE_FIELDS,
    CampaignFilters,
    CampaignList,
    CampaignResponse,
    CreateCampaignRequest,
    RecipientList,
    ResumeRequest,
    RetryPolicy,
    ScheduleRequest,
)
from api.campaigns.service import CAMPAIGN_CALLS_AT_ONCE
from api.contacts.body import validate_optional_body
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.clock import utcnow
from tenancy.errors import APIError

blueprint = Blueprint("campaigns", __name__, url_prefix="/webhooks/inbound")


def _invalid(field: str, message: str) -> APIError:
    return APIError(
        400,
        "validation_error",
        f"{field} {message}",
        details=[{"field": field, "message": message, "type": "value_error"}],
    )


def future_start_date(raw: str) -> datetime:
    """An ISO 8601 datetime with a timezone, later than now; otherwise 400."""
    try:
        value = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise _invalid("start_date", "must be an ISO 8601 datetime") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise _invalid("start_date", "must include a timezone (for example Z or +02:00)")
    if value <= utcnow():
        raise _invalid("start_date", "must be in the future")
    return value


def _call_settings(data: CreateCampaignRequest) -> service.CallSettings | None:
    """A call campaign's own fields, checked; None for email and SMS (which may not set them)."""
    sent = data.model_fields_set
    if data.campaign_type != "call":
        for field in CALL_FIELDS:
            if field in sent and getattr(data, field) is not None:
                raise _invalid(field, "is only for call campaigns")
        return None
    for field in MESSAGE_FIELDS:
        if field in sent and getattr(data, field) is not None:
            raise _invalid(field, "is not for call campaigns")
    if data.business_hours_enabled:
        raise _invalid("business_hours_enabled", "is not for call campaigns (use calling_window)")
    if data.agent_id is None:
        raise APIError(
            400,
            "validation_error",
            "agent_id is required for a call campaign",
            details=[{"field": "agent_id", "message": "field required", "type": "missing"}],
        )
    window = None
    if data.calling_window is not None:
        window = service.checked_hours(data.calling_window, "calling_window")
    retry = data.retry or RetryPolicy()
    return service.CallSettings(
        agent_id=parse_uuid(data.agent_id, "agent_id"),
        pool_id=parse_uuid(data.pool_id, "pool_id") if data.pool_id is not None else None,
        variables=data.variables or {},
        calling_window=window,
        max_concurrent_calls=data.max_concurrent_calls or CAMPAIGN_CALLS_AT_ONCE,
        retry={
            "max_attempts": retry.max_attempts,
            "delay_minutes": retry.delay_minutes,
            "on": list(dict.fromkeys(retry.on)),
        },
    )


def _new_campaign(data: CreateCampaignRequest) -> service.NewCampaign:
    calling = _call_settings(data)
    if (
        data.campaign_type == "sms"
        and data.message_content is not None
        and len(data.message_content) > MAX_SMS_CONTENT
    ):
        raise _invalid("message_content", f"is at most {MAX_SMS_CONTENT} characters for sms")
    contact_ids = list(
        dict.fromkeys(
            parse_uuid(value, f"contact_ids[{index}]")
            for index, value in enumerate(data.contact_ids or [])
        )
    )
    smart_list_id = (
        parse_uuid(data.smart_list_id, "smart_list_id") if data.smart_list_id is not None else None
    )
    config = service.checked_business_hours(data.business_hours_enabled, data.business_hours_config)
    return service.NewCampaign(
        name=data.name.strip(),
        campaign_type=data.campaign_type,
        subject=data.subject,
        message_content=data.message_content,
        contact_ids=contact_ids,
        smart_list_id=smart_list_id,
        business_hours_enabled=data.business_hours_enabled,
        business_hours_config=config,
        calling=calling,
    )


@blueprint.post("/campaigns")
@tag(["Campaigns"])
@requires(SUB_ACCOUNT)
@validate_request(CreateCampaignRequest)
@validate_response(CampaignResponse, 201)
@validate_errors(Error, 400, 404)
async def create_campaign(data: CreateCampaignRequest) -> tuple[dict[str, Any], int]:
    """Create a draft campaign (content may come later; schedule checks it).

    400 validation_error for business hours whose end is not after their start."""
    campaign = await service.create_campaign(tenant_scope(), _new_campaign(data))
    return {"status": "success", "campaign": campaign}, 201


@blueprint.get("/campaigns")
@tag(["Campaigns"])
@requires(SUB_ACCOUNT)
@validate_querystring(CampaignFilters)
@validate_response(CampaignList, 200)
@validate_response(Error, 400)
async def list_campaigns(query_args: CampaignFilters) -> dict[str, Any]:
    """List campaigns, newest first, optionally of one status."""
    limit, offset = pagination(request.args)
    campaigns, total = await service.list_campaigns(
        tenant_scope(), query_args.status, limit, offset
    )
    return page_body("campaigns", campaigns, total, limit, offset)


@blueprint.get("/campaigns/<campaign_id>")
@tag(["Campaigns"])
@requires(SUB_ACCOUNT)
@validate_response(CampaignResponse, 200)
@validate_errors(Error, 400, 404)
async def get_campaign(campaign_id: str) -> dict[str, Any]:
    """Read a campaign with its live counters (progress, contacted, success, pending, ...)."""
    campaign = await service.get_campaign(tenant_scope(), parse_uuid(campaign_id))
    return {"status": "success", "campaign": campaign}


@blueprint.post("/campaigns/<campaign_id>/schedule")
@tag(["Campaigns"])
@requires(SUB_ACCOUNT)
@validate_request(ScheduleRequest)
@validate_response(CampaignResponse, 200)
@validate_errors(Error, 400, 404, 409)
async def schedule_campaign(campaign_id: str, data: ScheduleRequest) -> dict[str, Any]:
    """Schedule a draft campaign or reschedule a scheduled one; it is sent at start_date.

    400 validation_error for a start_date that is not in the future."""
    campaign_uuid = parse_uuid(campaign_id)
    start_date = future_start_date(data.start_date)
    campaign = await service.schedule_campaign(tenant_scope(), campaign_uuid, start_date)
    return {"status": "success", "campaign": campaign}


@blueprint.post("/campaigns/<campaign_id>/cancel")
@tag(["Campaigns"])
@requires(SUB_ACCOUNT)
@validate_response(CampaignResponse, 200)
@validate_errors(Error, 400, 404, 409)
async def cancel_campaign(campaign_id: str) -> dict[str, Any]:
    """Cancel a draft or scheduled campaign (nothing of it is sent), or a call campaign that is
    calling or paused (its calls on the line finish, no new one starts)."""
    campaign = await service.cancel_campaign(tenant_scope(), parse_uuid(campaign_id))
    return {"status": "success", "campaign": campaign}


@blueprint.post("/campaigns/<campaign_id>/resume")
@tag(["Campaigns"])
@requires(SUB_ACCOUNT)
@validate_optional_body(ResumeRequest)
@validate_response(CampaignResponse, 200)
@validate_errors(Error, 400, 404, 409)
async def resume_campaign(campaign_id: str, data: ResumeRequest) -> dict[str, Any]:
    """Resume a paused campaign at a future start_date, or at once without one.

    400 validation_error for a start_date that is not in the future."""
    campaign_uuid = parse_uuid(campaign_id)
    start_date = future_start_date(data.start_date) if data.start_date is not None else None
    campaign = await service.resume_campaign(tenant_scope(), campaign_uuid, start_date)
    return {"status": "success", "campaign": campaign}


@blueprint.get("/campaigns/<campaign_id>/recipients")
@tag(["Campaigns"])
@requires(SUB_ACCOUNT)
@validate_response(RecipientList, 200)
@validate_errors(Error, 400, 404)
async def list_recipients(campaign_id: str) -> dict[str, Any]:
    """List a campaign's recipients (fixed when it starts) with each one's status, attempts,
    calls or message, outcome and error."""
    campaign_uuid = parse_uuid(campaign_id)
    limit, offset = pagination(request.args)
    recipients, total = await service.list_recipients(tenant_scope(), campaign_uuid, limit, offset)
    return page_body("recipients", recipients, total, limit, offset)
