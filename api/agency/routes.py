"""Agency operations under /functions/v1: provisioning, invitations, plans, keys, wallet credit."""

from __future__ import annotations

from typing import Any

import asyncpg
from quart import Blueprint, Response, current_app, request
from quart_schema import hide, tag, validate_request

from api.agency import service
from api.agency.invitation_page import invitation_page
from api.agency.schemas import (
    AcceptInvitationRequest,
    AcceptInvitationResponse,
    AddSubAccountUserRequest,
    AddSubAccountUserResponse,
    ApiKeyResponse,
    CreatePlanRequest,
    CreateSubAccountRequest,
    CreateSubAccountResponse,
    InvitationEmailFailed,
    PlanResponse,
    SubAccountList,
    WalletCreditRequest,
    WalletCreditResponse,
)
from api.auth import AGENCY, principal, requires
from api.schemas import FunctionsError
from api.types import normalise_email, page_fields, pagination, parse_uuid
from api.validation import validate_errors, validate_response
from tenancy.errors import APIError
from tenancy.invitations import accept_invitation, show_invitation
from tenancy.provisioning import NewSubAccount, provision_sub_account
from tenancy.settings import get_settings

blueprint = Blueprint("agency", __name__, url_prefix="/functions/v1")


def _pool() -> asyncpg.Pool:
    return current_app.config["DB_POOL"]


def _missing(field: str, message: str) -> APIError:
    return APIError(
        400,
        "validation_error",
        message,
        details=[{"field": field, "message": message, "type": "missing"}],
    )


def _email(raw: str | None) -> str:
    if raw is None or not raw.strip():
        raise _missing("email", "email is required")
    email = normalise_email(raw)
    if email is None:
        raise APIError(
            400,
            "validation_error",
            "email is not a valid address",
            details=[{"field": "email", "message": "invalid email address", "type": "email"}],
        )
    return email


@blueprint.post("/create-subaccount-webhook")
@tag(["Sub-Accounts"])
@requires(AGENCY)
@validate_request(CreateSubAccountRequest)
@validate_response(CreateSubAccountResponse, 201)
@validate_errors(FunctionsError, 400, 401, 403, 404)
async def create_subaccount_webhook(data: CreateSubAccountRequest) -> tuple[dict[str, Any], int]:
    """Provision a sub-account, optionally linked to a CRM location, and invite its owner."""
    email = _email(data.email)
    name = data.name.strip() if data.name and data.name.strip() else None
    location_id = data.locationID.strip() if data.locationID and data.locationID.strip() else None
    if name is None and location_id is None:
        raise _missing("name", "name is required when locationID is absent")
    plan = data.plan.strip() if data.plan and data.plan.strip() else None
    result = await provision_sub_account(
        _pool(), principal().organisation_id, NewSubAccount(email, name, location_id, plan)
    )
    return {"success": True, **result}, 201


@blueprint.post("/crm-api/add-subaccount-user")
@tag(["Sub-Account Users"])
@requires(AGENCY)
@validate_request(AddSubAccountUserRequest)
@validate_response(AddSubAccountUserResponse, 201)
@validate_errors(FunctionsError, 400, 403, 404, 409)
@validate_response(InvitationEmailFailed, 502)
async def add_subaccount_user(data: AddSubAccountUserRequest) -> tuple[dict[str, Any], int]:
    """Invite a user to a sub-account of the agency (an open invitation is refreshed)."""
    email = _email(data.email)
    if data.role is None or not data.role.strip():
        raise _missing("role", "role is required")
    if data.sub_account_id is None:
        raise _missing("sub_account_id", "sub_account_id is required")
    sub_account_id = parse_uuid(data.sub_account_id, "sub_account_id")
    result = await service.invite_user(
        _pool(),
        principal().organisation_id,
        sub_account_id,
        email,
        data.role.strip(),
        data.first_name,
        data.last_name,
        data.phone,
    )
    return {"success": True, **result}, 201


@blueprint.get("/accept-invitation")
@hide
async def invitation_link() -> Response:
    """The page the invitation email links to: shows the invitation, accepts it with a button."""
    token = request.args.get("token", "").strip()
    shown = await show_invitation(_pool(), token) if 0 < len(token) <= 64 else None
    html, status = invitation_page(shown, token, request.path, get_settings().public_url)
    return Response(
        html,
        status=status,
        content_type="text/html; charset=utf-8",
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


@blueprint.post("/accept-invitation")
@tag(["Sub-Account Users"])
@validate_request(AcceptInvitationRequest)
@validate_response(AcceptInvitationResponse, 200)
@validate_errors(FunctionsError, 404, 410)
async def accept(data: AcceptInvitationRequest) -> dict[str, Any]:
    """Accept an invitation by its token (no API key): the user becomes a member."""
    result = await accept_invitation(_pool(), data.token.strip(), data.first_name, data.last_name)
    return {"success": True, **result}


@blueprint.post("/agency/plans")
@tag(["Sub-Accounts"])
@requires(AGENCY)
@validate_request(CreatePlanRequest)
@validate_response(PlanResponse, 201)
@validate_response(FunctionsError, 409)
async def create_plan(data: CreatePlanRequest) -> tuple[dict[str, Any], int]:
    """Create a pricing plan that sub-accounts can be provisioned on."""
    plan = await service.create_plan(_pool(), principal().organisation_id, data)
    return {"success": True, "plan": plan}, 201


@blueprint.get("/agency/sub-accounts")
@tag(["Sub-Accounts"])
@requires(AGENCY)
@validate_response(SubAccountList, 200)
async def list_sub_accounts() -> dict[str, Any]:
    """List the agency's sub-accounts, newest first."""
    limit, offset = pagination(request.args)
    items, total = await service.list_sub_accounts(
        _pool(), principal().organisation_id, limit, offset
    )
    return {"success": True, **page_fields("sub_accounts", items, total, limit, offset)}


@blueprint.post("/agency/sub-accounts/<sub_account_id>/api-keys")
@tag(["Sub-Account API Keys"])
@requires(AGENCY)
@validate_response(ApiKeyResponse, 201)
@validate_response(FunctionsError, 404)
async def create_api_key(sub_account_id: str) -> tuple[dict[str, Any], int]:
    """Issue a sub-account API key; it is shown only in this response."""
    key_id, key = await service.issue_sub_account_key(
        _pool(), principal().organisation_id, parse_uuid(sub_account_id)
    )
    return {"success": True, "key_id": key_id, "api_key": key}, 201


@blueprint.post("/agency/sub-accounts/<sub_account_id>/wallet/credit")
@tag(["Agency Wallet"])
@requires(AGENCY)
@validate_request(WalletCreditRequest)
@validate_response(WalletCreditResponse, 200)
@validate_response(FunctionsError, 404)
async def credit_wallet(sub_account_id: str, data: WalletCreditRequest) -> dict[str, Any]:
    """Credit a sub-account's prepaid wallet.

    400 validation_error when the credit would take the balance past 9,999,999,999.99."""
    balance = await service.credit_wallet(
        _pool(),
        principal().organisation_id,
        parse_uuid(sub_account_id),
        data.amount,
        data.description,
    )
    return {"success": True, "balance": balance}
