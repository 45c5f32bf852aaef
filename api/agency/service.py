"""Agency rules: inviting users, plans, sub-account keys, listing, and wallet credit."""

from __future__ import annotations

import logging
import uuid
from decimal import Decimal
from typing import Any

import asyncpg

from api.agency.schemas import CreatePlanRequest
from api.wallet import service as wallet
from integrations.email import EmailDeliveryError
from tenancy.db import fetch_one_or_404, fetch_page, tenant_transaction
from tenancy.errors import APIError, not_found
from tenancy.invitations import email_config_for, email_invitation, upsert_invitation
from tenancy.principals import insert_key
from tenancy.tables.control import ROLES

log = logging.getLogger("switchboard.agency")

# A deleted sub-account (waiting for its purge) behaves as missing to every agency operation.
SELECT_SUB_ACCOUNT = """
SELECT id, organisation_id, name, schema_name, max_users
FROM control.sub_accounts WHERE id = $1 AND status <> 'deleted'
"""

COUNT_SEATS = """
SELECT (SELECT count(*) FROM control.memberships WHERE sub_account_id = $1 AND is_active)
     + (SELECT count(*) FROM control.invitations
        WHERE sub_account_id = $1 AND accepted_at IS NULL AND expires_at > now() AND email <> $2)
"""

OPEN_INVITATION_EXISTS = """
SELECT EXISTS (SELECT 1 FROM control.invitations
               WHERE sub_account_id = $1 AND email = $2 AND accepted_at IS NULL)
"""

IS_ACTIVE_MEMBER = """
SELECT EXISTS (SELECT 1 FROM control.memberships AS m JOIN control.users AS u ON u.id = m.user_id
               WHERE m.sub_account_id = $1 AND u.email = $2 AND m.is_active)
"""


async def sub_account_of_organisation(
    conn: asyncpg.Connection | asyncpg.Pool, sub_account_id: uuid.UUID, organisation_id: uuid.UUID
) -> asyncpg.Record:
    """The sub-account if this organisation owns it; another organisation's behaves as missing."""
    row = await conn.fetchrow(SELECT_SUB_ACCOUNT, sub_account_id)
    if row is None or row["organisation_id"] != organisation_id:
        raise not_found("sub-account")
    return row


async def invite_user(
    pool: asyncpg.Pool,
    organisation_id: uuid.UUID,
    sub_account_id: uuid.UUID,
    email: str,
    role: str,
    first_name: str | None,
    last_name: str | None,
    phone: str | None,
) -> dict[str, Any]:
    if role not in ROLES:
        raise APIError(
            400,
            "validation_error",
            "role must be one of " + ", ".join(ROLES),
            details=[{"field": "role", "message": "unknown role", "type": "enum"}],
        )
    async with pool.acquire() as conn, conn.transaction():
        # The row lock serialises invitations to one sub-account, so the limit holds.
        row = await fetch_one_or_404(
            conn, SELECT_SUB_ACCOUNT + " FOR UPDATE", sub_account_id, what="sub-account"
        )
        if row["organisation_id"] != organisation_id:
            raise APIError(403, "forbidden", "the sub-account belongs to another organisation")
        if await conn.fetchval(IS_ACTIVE_MEMBER, sub_account_id, email):
            raise APIError(409, "user_already_member", "this user is already a member")
        refreshing = await conn.fetchval(OPEN_INVITATION_EXISTS, sub_account_id, email)
        if not refreshing and row["max_users"] is not None:
            seats = await conn.fetchval(COUNT_SEATS, sub_account_id, email)
            if seats >= row["max_users"]:
                raise APIError(
                    403,
                    "user_limit_reached",
                    f"the sub-account already has its {row['max_users']} users",
                )
        invitation = await upsert_invitation(
            conn, sub_account_id, email, role, first_name, last_name, phone
        )
        config = await email_config_for(conn, organisation_id)
    try:
        await email_invitation(config, invitation, row["name"])
    except Exception as exc:
        # The invitation is committed: whatever failed, the answer says so and carries the token
        # (a retry refreshes the same invitation), never a bare 500.
        if not isinstance(exc, EmailDeliveryError):
            log.exception("invitation email for %s failed", invitation.id)
        raise APIError(
            502,
            "email_delivery_failed",
            "the invitation was created but its email could not be sent",
            extra={"invitation_token": invitation.token},
        ) from None
    return {
        "message": ("invitation refreshed and sent" if refreshing else "invitation sent")
        + f" to {email}",
        "invitation_id": invitation.id,
        "expires_at": invitation.expires_at,
    }


INSERT_PLAN = """
INSERT INTO control.plans
    (organisation_id, slug, name, max_users, features, rebilling, max_concurrent_calls)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (organisation_id, slug) DO NOTHING
RETURNING id, slug, name, max_users, features, rebilling, max_concurrent_calls, created_at
"""


async def create_plan(
    pool: asyncpg.Pool, organisation_id: uuid.UUID, data: CreatePlanRequest
) -> dict[str, Any]:
    rebilling = data.rebilling.model_dump(exclude_none=True) if data.rebilling else {}
    row = await pool.fetchrow(
        INSERT_PLAN,
        organisation_id,
        data.slug,
        data.name,
        data.max_users,
        data.features or {},
        {key: str(value) for key, value in rebilling.items()},
        data.max_concurrent_calls,
    )
    if row is None:
        raise APIError(409, "plan_slug_taken", f"a plan with slug {data.slug!r} already exists")
    return plan_out(row)


def plan_out(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "id": row["id"],
        "slug": row["slug"],
        "name": row["name"],
        "max_users": row["max_users"],
        "max_concurrent_calls": row["max_concurrent_calls"],
        "features": row["features"],
        "rebilling": {key: float(value) for key, value in row["rebilling"].items()},
        "created_at": row["created_at"],
    }


async def issue_sub_account_key(
    pool: asyncpg.Pool, organisation_id: uuid.UUID, sub_account_id: uuid.UUID
) -> tuple[uuid.UUID, str]:
    async with pool.acquire() as conn, conn.transaction():
        await sub_account_of_organisation(conn, sub_account_id, organisation_id)
        return await insert_key(conn, "sub_account", organisation_id, sub_account_id)


LIST_SUB_ACCOUNTS = """
SELECT s.id, s.name, s.slug, p.slug AS plan, s.status, s.crm_connected, s.crm_location_id,
       s.timezone, s.created_at, count(*) OVER () AS total
FROM control.sub_accounts AS s
LEFT JOIN control.plans AS p ON p.id = s.plan_id
WHERE s.organisation_id = $1
ORDER BY s.created_at DESC, s.id
LIMIT $2 OFFSET $3
"""

COUNT_ORGANISATION_SUB_ACCOUNTS = (
    "SELECT count(*) FROM control.sub_accounts WHERE organisation_id = $1"
)


async def list_sub_accounts(
    pool: asyncpg.Pool, organisation_id: uuid.UUID, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    return await fetch_page(
        pool,
        LIST_SUB_ACCOUNTS,
        COUNT_ORGANISATION_SUB_ACCOUNTS,
        organisation_id,
        limit,
        offset,
        count_args=(organisation_id,),
    )


async def credit_wallet(
    pool: asyncpg.Pool,
    organisation_id: uuid.UUID,
    sub_account_id: uuid.UUID,
    amount: Decimal,
    description: str | None,
) -> Decimal:
    if amount != amount.quantize(Decimal("0.01")):
        raise APIError(
            400,
            "validation_error",
            "amount has more than 2 decimal places",
            details=[
                {"field": "amount", "message": "at most 2 decimal places", "type": "decimal_places"}
            ],
        )
    row = await sub_account_of_organisation(pool, sub_account_id, organisation_id)
    async with tenant_transaction(pool, row["schema_name"]) as conn:
        return await wallet.credit(conn, amount, "agency_credit", description)
