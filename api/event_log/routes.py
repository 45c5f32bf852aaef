"""The event log under /webhooks/inbound: the events feed, delivery logs and redelivery."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from quart import Blueprint, request
from quart_schema import document_querystring, tag

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.event_log import service
from api.event_log.schemas import DeliveryList, EventList, EventsQuery, Redelivered
from api.event_log.service import invalid
from api.events import EVENT_TYPES
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response

blueprint = Blueprint("event_log", __name__, url_prefix="/webhooks/inbound")

# What api.events makes; anything else is no event of any sub-account.
EVENT_ID = re.compile(r"^msg_[0-9a-f]{32}$")


def _types(args: Any) -> list[str] | None:
    types = args.getlist("type")
    unknown = [name for name in types if name not in EVENT_TYPES]
    if unknown:
        raise invalid("type", f"unknown event type(s): {', '.join(unknown)}")
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
        raise invalid(
            "since", "since must be an ISO 8601 timestamp, such as 2026-11-24T10:00:00.000Z"
        ) from None


def _after(args: Any) -> str | None:
    after = args.get("after")
    if after is not None and "since" in args:
        raise invalid("after", "give since or after, not both")
    if after is not None and not EVENT_ID.fullmatch(after):
        raise invalid("after", "after must be the id of an event of this sub-account")
    return after  # type: ignore[no-any-return]


@blueprint.get("/events")
@tag(["Events"])
@requires(SUB_ACCOUNT)
@document_querystring(EventsQuery)
@validate_response(EventList, 200)
@validate_response(Error, 400)
async def list_events() -> dict[str, Any]:
    """List the events of the last 30 days, newest first, delivered or not.

    The feed is in commit order: an event is listed only once every event before it in the
    feed's order is, so a poller misses nothing by asking for what came after the newest event
    it has seen, with `since` (the largest timestamp it has seen; exclusive) or `after` (that
    event's id), not both. With either, the set is every event after that point, still newest
    first and paged like any list. A poller walks the pages (offset += limit) until `has_more`
    is false, then keeps the largest timestamp (or the id of the newest event) of the whole
    walk as its next cursor. Events committed during a walk come in at the front, so a later
    page may repeat an event (de-duplicate by id) but none is skipped: whatever the walk did
    not see comes after its cursor.

    400 validation_error for `since` with `after`, and for an `after` that is not the id of an
    event of this sub-account.
    """
    limit, offset = pagination(request.args)
    types, since, after = _types(request.args), _since(request.args), _after(request.args)
    items, total = await service.list_events(tenant_scope(), types, since, after, limit, offset)
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
@validate_errors(Error, 400, 404, 409, 429)
async def redeliver(delivery_id: str) -> tuple[dict[str, Any], int]:
    """Send a finished delivery's event again: a new delivery, same webhook-id, signed afresh.

    At most 10 redeliveries of one original delivery (its redeliveries' included) in any
    rolling hour; past that, 429 `redelivery_limited` with Retry-After."""
    delivery = await service.redeliver(tenant_scope(), parse_uuid(delivery_id, "id"))
    return {"status": "success", "delivery": delivery}, 202
