"""The event log under /webhooks/inbound: the events feed, delivery logs and redelivery."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from quart import Blueprint, request
from quart_schema import document_querystring, tag

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.event_log import service
from api.event_log.schemas import DeliveryList, EventList, EventsQuery, Redelivered
from api.events import EVENT_TYPES
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError

blueprint = Blueprint("event_log", __name__, url_prefix="/webhooks/inbound")


def _invalid(field: str, message: str) -> APIError:
    return APIError(400, "validation_error", message,
                    details=[{"field": field, "message": message, "type": "value_error"}])


def _types(args: Any) -> list[str] | None:
    types = args.getlist("type")
    unknown = [name for name in types if name not in EVENT_TYPES]
    if unknown:
        raise _invalid("type", f"unknown event type(s): {', '.join(unknown)}")
    return list(dict.fromkeys(types)) or None


def _since(args: Any) -> datetime | None:
    raw = args.get("since")
    if raw is None:
        return None
    try:
        since = datetime.fromisoformat(raw)
        # In UTC, where a zone could carry it past year 9999 (or before year 1).
        return since.astimezone(UTC) if since.tzinfo else since.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise _invalid("since", "since must be an ISO 8601 timestamp, such as "
                                "2026-11-24T10:00:00.000Z") from None


@blueprint.get("/events")
@tag(["Events"])
@requires(SUB_ACCOUNT)
@document_querystring(EventsQuery)
@validate_response(EventList, 200)
@validate_response(Error, 400)
async def list_events() -> dict[str, Any]:
    """List the events of the last 30 days, newest first, delivered or not."""
    limit, offset = pagination(request.args)
    types, since = _types(request.args), _since(request.args)
    items, total = await service.list_events(tenant_scope(), types, since, limit, offset)
    return page_body("events", items, total, limit, offset)


async def _delivery_log(log: service.DeliveryLog, owner_id: str) -> dict[str, Any]:
    owner = parse_uuid(owner_id, "id")
    limit, offset = pagination(request.args)
    items, total = await service.list_deliveries(tenant_scope(), log, owner, limit, offset)
    return page_body("deliveries", items, total, limit, offset)


@blueprint.get("/webhook-subscriptions/<subscription_id>/deliveries")
@tag(["Webhook Subscriptions"])
@requires(SUB_ACCOUNT)
@validate_response(DeliveryList, 200)
@validate_errors(Error, 400, 404)
async def list_subscription_deliveries(subscription_id: str) -> dict[str, Any]:
    """List a subscription's deliveries (a deleted one's too), newest first, with attempts."""
    return await _delivery_log(service.SUBSCRIPTION_LOG, subscription_id)


@blueprint.get("/agents/<agent_id>/deliveries")
@tag(["Agents"])
@requires(SUB_ACCOUNT)
@validate_response(DeliveryList, 200)
@validate_errors(Error, 400, 404)
async def list_agent_deliveries(agent_id: str) -> dict[str, Any]:
    """List the deliveries of an agent's post-call webhook, newest first, with attempts."""
    return await _delivery_log(service.AGENT_LOG, agent_id)


@blueprint.post("/webhook-deliveries/<delivery_id>/redeliver")
@tag(["Webhook Subscriptions"])
@requires(SUB_ACCOUNT)
@validate_response(Redelivered, 202)
@validate_errors(Error, 400, 404, 409)
async def redeliver(delivery_id: str) -> tuple[dict[str, Any], int]:
    """Send a finished delivery's event again: a new delivery, same webhook-id, signed afresh."""
    delivery = await service.redeliver(tenant_scope(), parse_uuid(delivery_id, "id"))
    return {"status": "success", "delivery": delivery}, 202
