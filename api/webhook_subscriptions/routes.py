"""Webhook subscriptions under /webhooks/inbound: create, list, delete."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app, request
from quart_schema import tag, validate_request

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.events import ALL_EVENTS, EVENT_TYPES
from api.schemas import InboundError as Error
from api.types import page_body, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from api.webhook_subscriptions import service
from api.webhook_subscriptions.schemas import (
    CreateSubscriptionRequest,
    SubscriptionCreated,
    SubscriptionDeleted,
    SubscriptionList,
)
from integrations.webhooks import TargetNotAllowed, check_target, parse_target
from tenancy.errors import APIError

blueprint = Blueprint("webhook_subscriptions", __name__, url_prefix="/webhooks/inbound")


def _invalid(field: str, message: str) -> APIError:
    return APIError(
        400,
        "validation_error",
        message,
        details=[{"field": field, "message": message, "type": "value_error"}],
    )


def _events(requested: list[str]) -> list[str]:
    unknown = [event for event in requested if event not in (*EVENT_TYPES, ALL_EVENTS)]
    if unknown:
        raise _invalid(
            "events",
            f"unknown event type(s): {', '.join(unknown)}; "
            f"known: {', '.join(EVENT_TYPES)}, or {ALL_EVENTS} for all",
        )
    return list(dict.fromkeys(requested))


async def _url(raw: str) -> str:
    url = raw.strip(" ")
    try:
        parse_target(url)
    except TargetNotAllowed as exc:
        raise _invalid("url", f"url: {exc}") from None
    try:
        await check_target(url, allow_private=current_app.config["SETTINGS"].allow_private_webhooks)
    except TargetNotAllowed as exc:
        raise APIError(400, "webhook_url_not_allowed", str(exc)) from None
    return url


@blueprint.post("/webhook-subscriptions")
@tag(["Webhook Subscriptions"])
@requires(SUB_ACCOUNT)
@validate_request(CreateSubscriptionRequest)
@validate_response(SubscriptionCreated, 201)
@validate_response(Error, 400)
async def create_subscription(data: CreateSubscriptionRequest) -> tuple[dict[str, Any], int]:
    """Subscribe a URL to outbound events; the signing secret is shown only here."""
    events = _events(data.events)
    url = await _url(data.url)
    subscription = await service.create_subscription(tenant_scope(), url, events)
    return {"status": "success", "subscription": subscription}, 201


@blueprint.get("/webhook-subscriptions")
@tag(["Webhook Subscriptions"])
@requires(SUB_ACCOUNT)
@validate_response(SubscriptionList, 200)
@validate_response(Error, 400)
async def list_subscriptions() -> dict[str, Any]:
    """List the sub-account's webhook subscriptions, newest first."""
    limit, offset = pagination(request.args)
    items, total = await service.list_subscriptions(tenant_scope(), limit, offset)
    return page_body("subscriptions", items, total, limit, offset)


@blueprint.delete("/webhook-subscriptions/<subscription_id>")
@tag(["Webhook Subscriptions"])
@requires(SUB_ACCOUNT)
@validate_response(SubscriptionDeleted, 200)
@validate_errors(Error, 400, 404)
async def delete_subscription(subscription_id: str) -> dict[str, Any]:
    """Delete a subscription: it receives nothing more, pending deliveries are cancelled."""
    sub_id = parse_uuid(subscription_id, "id")
    await service.delete_subscription(tenant_scope(), sub_id)
    return {"status": "success", "deleted": True, "subscription_id": sub_id}
