"""Provisioning a sub-account, in the order SPEC.md gives for create-subaccount-webhook.

The checks run once without locks (so a refusal costs nothing), the CRM location is fetched
outside any transaction, and then one transaction locks the organisation row, checks the
sub-account limit again (so concurrent creates cannot pass it), and writes the sub-account, its
schema at head, its zero-balance wallet and the owner invitation together. The invitation email
and the CRM connection follow the commit.
"""

from __future__ import annotations

import logging
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from integrations.crm import CRMError, Location, crm_provider
from integrations.email import EmailDeliveryError, SMTPConfig, one_line
from tenancy.clock import utcnow
from tenancy.db import fetch_one_or_404, retire, schema_name_for, serve_tenant
from tenancy.errors import APIError
from tenancy.invitations import (
    IssuedInvitation,
    email_config_for,
    email_invitation,
    upsert_invitation,
)
from tenancy.schema import create_tenant_schema
from tenancy.settings import get_settings

log = logging.getLogger("switchboard.provisioning")

PROVISIONING_PLAN_TYPES = ("white_label", "saas")


@dataclass(frozen=True)
class NewSubAccount:
    email: str
    name: str | None
    location_id: str | None
    plan_slug: str | None


SELECT_ORGANISATION = """
SELECT id, name, plan_type, is_active, max_sub_accounts, default_max_users, default_rebilling
FROM control.organisations WHERE id = $1
"""

COUNT_SUB_ACCOUNTS = "SELECT count(*) FROM control.sub_accounts WHERE organisation_id = $1"

SELECT_PLAN = """
SELECT id, slug, max_users, features, rebilling
FROM control.plans WHERE organisation_id = $1 AND slug = $2
"""

INSERT_SUB_ACCOUNT = """
INSERT INTO control.sub_accounts
    (id, organisation_id, name, slug, schema_name, plan_id, max_users, features, rebilling,
     timezone, crm_location_id, schema_version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (slug) DO NOTHING
RETURNING id
"""

INSERT_WALLET = "INSERT INTO wallet (id, balance) VALUES (1, 0)"

UPDATE_CRM = """
UPDATE control.sub_accounts SET crm_connected = $2, crm_error = $3, updated_at = now()
WHERE id = $1
"""


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48].strip("-")
    return slug or "sub-account"


async def check_organisation(
    conn: asyncpg.Connection | asyncpg.Pool, organisation_id: uuid.UUID, *, lock: bool = False
) -> asyncpg.Record:
    row = await fetch_one_or_404(
        conn,
        SELECT_ORGANISATION + (" FOR UPDATE" if lock else ""),
        organisation_id,
        what="organisation",
    )
    if not row["is_active"]:
        raise APIError(403, "organisation_inactive", "the organisation is inactive")
    if row["plan_type"] not in PROVISIONING_PLAN_TYPES:
        raise APIError(
            403,
            "plan_not_allowed",
            "sub-accounts need a white-label or SaaS-mode organisation plan",
        )
    count = await conn.fetchval(COUNT_SUB_ACCOUNTS, organisation_id)
    if count >= row["max_sub_accounts"]:
        raise APIError(
            403,
            "sub_account_limit_reached",
            f"the organisation already has its {row['max_sub_accounts']} sub-accounts",
        )
    return row


async def find_plan(
    conn: asyncpg.Connection | asyncpg.Pool, organisation_id: uuid.UUID, slug: str | None
) -> asyncpg.Record | None:
    if slug is None:
        return None
    plan = await conn.fetchrow(SELECT_PLAN, organisation_id, slug)
    if plan is None:
        raise APIError(404, "not_found", f"plan {slug!r} not found for this organisation")
    return plan


async def provision_sub_account(
    pool: asyncpg.Pool, organisation_id: uuid.UUID, request: NewSubAccount
) -> dict[str, Any]:
    await check_organisation(pool, organisation_id)
    await find_plan(pool, organisation_id, request.plan_slug)
    crm = crm_provider(get_settings().crm)
    location: Location | None = None
    crm_error: str | None = None
    if request.location_id is not None:
        try:
            location = await crm.fetch_location(request.location_id)
        except CRMError as exc:
            crm_error = str(exc)
    # A CRM's location name reaches the invitation's Subject: made one line (the client's own
    # name and locationID were refused at the API if they were not).
    name = one_line(location.name) if location else (request.name or request.location_id or "")
    timezone = location.timezone if location else "UTC"
    location_id = request.location_id

    sub_account_id = uuid.uuid4()
    schema = schema_name_for(sub_account_id)
    async with pool.acquire() as conn:
        async with conn.transaction():
            organisation = await check_organisation(conn, organisation_id, lock=True)
            plan = await find_plan(conn, organisation_id, request.plan_slug)
            slug = await _insert_sub_account(
                conn, sub_account_id, organisation, plan, name, schema, timezone, location_id
            )
            await create_tenant_schema(conn, schema)
            await conn.execute(INSERT_WALLET)
            invitation = await upsert_invitation(
                conn, sub_account_id, request.email, "sub_account_owner"
            )
            config = await email_config_for(conn, organisation_id)
        # The new schema's catalog entries stay cached in this backend: it counts towards the
        # connection's tenant budget like any tenant transaction (tenancy.db.PooledConnection).
        if serve_tenant(conn, schema):
            await retire(conn)

    result: dict[str, Any] = {
        "sub_account_id": sub_account_id,
        "sub_account_slug": slug,
        "invitation_token": invitation.token,
        "invitation_expires_at": invitation.expires_at,
        "crm_connected": False,
        "plan": plan["slug"] if plan else None,
    }
    # Everything below follows the commit: the sub-account exists, so nothing here may turn into
    # an error answer (a retry would provision a second one). Failures are reported in the body.
    result["invitation_email_sent"] = await _email_owner(config, invitation, name)
    if location is not None:
        try:
            await crm.connect_location(location.id, str(sub_account_id))
            result["crm_connected"] = True
        except CRMError as exc:
            crm_error = str(exc)
        except Exception as exc:
            log.exception("CRM connect of sub-account %s failed", sub_account_id)
            crm_error = f"CRM connection failed ({type(exc).__name__})"
    if result["crm_connected"] or crm_error is not None:
        await pool.execute(UPDATE_CRM, sub_account_id, result["crm_connected"], crm_error)
    if crm_error is not None:
        result["crm_error"] = crm_error
    return result


async def _email_owner(config: SMTPConfig, invitation: IssuedInvitation, name: str) -> bool:
    try:
        await email_invitation(config, invitation, name)
    except EmailDeliveryError:
        return False
    except Exception:
        log.exception("invitation email for %s failed", invitation.id)
        return False
    return True


async def _insert_sub_account(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    organisation: asyncpg.Record,
    plan: asyncpg.Record | None,
    name: str,
    schema: str,
    timezone: str,
    location_id: str | None,
) -> str:
    """Insert the row under the name's slug, or the slug with a timestamp suffix if taken."""
    from tenancy.schema import tenant_head

    base = slugify(name)
    stamp = utcnow().strftime("%Y%m%d%H%M%S%f")[:17]
    candidates = [base, f"{base}-{stamp}", f"{base}-{stamp}-{secrets.token_hex(3)}"]
    if plan is not None:
        max_users, features, rebilling = plan["max_users"], plan["features"], plan["rebilling"]
    else:
        max_users, features = organisation["default_max_users"], {}
        rebilling = organisation["default_rebilling"]
    for slug in candidates:
        inserted = await conn.fetchval(
            INSERT_SUB_ACCOUNT,
            sub_account_id,
            organisation["id"],
            name,
            slug,
            schema,
            plan["id"] if plan else None,
            max_users,
            features,
            rebilling,
            timezone,
            location_id,
            tenant_head(),
        )
        if inserted is not None:
            return slug
    raise APIError(500, "internal_error", "could not allocate a slug")
