"""Invitations to a sub-account: create or refresh, email, accept.

Tokens are random UUIDs shown once (in the email, or in a 502 answer for a retry); only their
SHA-256 is stored, so refreshing an invitation makes the old token unknown (404).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from integrations.email import SMTPConfig, build_message, one_line, send_email
from tenancy import secrets
from tenancy.clock import iso, utcnow
from tenancy.errors import APIError
from tenancy.keys import hash_token
from tenancy.settings import get_settings


@dataclass(frozen=True)
class IssuedInvitation:
    id: uuid.UUID
    token: str
    email: str
    role: str
    expires_at: datetime
    first_name: str | None = None


UPSERT_INVITATION = """
INSERT INTO control.invitations
    (sub_account_id, email, role, first_name, last_name, phone, token_hash, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (sub_account_id, email) WHERE accepted_at IS NULL DO UPDATE
SET role = EXCLUDED.role,
    first_name = COALESCE(EXCLUDED.first_name, control.invitations.first_name),
    last_name = COALESCE(EXCLUDED.last_name, control.invitations.last_name),
    phone = COALESCE(EXCLUDED.phone, control.invitations.phone),
    token_hash = EXCLUDED.token_hash,
    expires_at = EXCLUDED.expires_at,
    updated_at = now()
RETURNING id
"""


async def upsert_invitation(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    email: str,
    role: str,
    first_name: str | None = None,
    last_name: str | None = None,
    phone: str | None = None,
) -> IssuedInvitation:
    """Create the open invitation for (sub-account, email), or refresh the one there is."""
    token = str(uuid.uuid4())
    expires_at = utcnow() + timedelta(days=get_settings().invitation_ttl_days)
    invitation_id = await conn.fetchval(
        UPSERT_INVITATION,
        sub_account_id,
        email,
        role,
        first_name,
        last_name,
        phone,
        hash_token(token),
        expires_at,
    )
    return IssuedInvitation(invitation_id, token, email, role, expires_at, first_name)


SELECT_EMAIL_CONFIG = """
SELECT host, port, username, password, from_address, starttls
FROM control.email_configs WHERE organisation_id = $1
"""


async def email_config_for(
    conn: asyncpg.Connection | asyncpg.Pool, organisation_id: uuid.UUID
) -> SMTPConfig:
    """The organisation's own SMTP server when it has one, else the platform's."""
    settings = get_settings()
    row = await conn.fetchrow(SELECT_EMAIL_CONFIG, organisation_id)
    if row is not None:
        return SMTPConfig(
            host=row["host"],
            port=row["port"],
            from_address=row["from_address"],
            username=row["username"],
            password=secrets.decrypt_optional(row["password"]),
            starttls=row["starttls"],
            timeout=settings.smtp_timeout_seconds,
        )
    return SMTPConfig(
        host=settings.smtp_host,
        port=settings.smtp_port,
        from_address=settings.smtp_from,
        username=settings.smtp_username,
        password=settings.smtp_password,
        starttls=settings.smtp_starttls,
        timeout=settings.smtp_timeout_seconds,
    )


async def email_invitation(
    config: SMTPConfig, invitation: IssuedInvitation, sub_account_name: str
) -> None:
    """Send the invitation; raises EmailDeliveryError when the server refuses or is down."""
    accept_url = (
        f"{get_settings().public_url}/functions/v1/accept-invitation?token={invitation.token}"
    )
    greeting = f"Hello {invitation.first_name}," if invitation.first_name else "Hello,"
    text = (
        f"{greeting}\n\n"
        f"You have been invited to join {sub_account_name} on Switchboard as "
        f"{invitation.role.replace('_', ' ')}.\n\n"
        f"Accept it at {accept_url} before {iso(invitation.expires_at)}.\n\n"
        f"Invitation token: {invitation.token}\n"
    )
    message = build_message(
        config,
        invitation.email,
        f"You are invited to {one_line(sub_account_name)}",
        text,
        headers={"X-Switchboard-Invitation": str(invitation.id)},
    )
    await send_email(config, message)


# A suspended or deleted sub-account takes no new members: its invitations read as unknown.
# The sub-account row is locked too (FOR SHARE), so a suspend waits for an accept under way.
SELECT_INVITATION_FOR_UPDATE = """
SELECT i.id, i.sub_account_id, i.email, i.role, i.first_name, i.last_name, i.phone,
       i.expires_at, i.accepted_at
FROM control.invitations i
JOIN control.sub_accounts s ON s.id = i.sub_account_id
WHERE i.token_hash = $1 AND s.status = 'active'
FOR UPDATE OF i FOR SHARE OF s
"""

UPSERT_USER = """
INSERT INTO control.users (email, first_name, last_name, phone)
VALUES ($1, $2, $3, $4)
ON CONFLICT (email) DO UPDATE
SET first_name = COALESCE(EXCLUDED.first_name, control.users.first_name),
    last_name = COALESCE(EXCLUDED.last_name, control.users.last_name),
    phone = COALESCE(control.users.phone, EXCLUDED.phone),
    updated_at = now()
RETURNING id
"""

UPSERT_MEMBERSHIP = """
INSERT INTO control.memberships (user_id, sub_account_id, role)
VALUES ($1, $2, $3)
ON CONFLICT (sub_account_id, user_id) DO UPDATE
SET role = EXCLUDED.role, is_active = true, updated_at = now()
"""

MARK_ACCEPTED = """
UPDATE control.invitations SET accepted_at = now(), accepted_user_id = $2, updated_at = now()
WHERE id = $1
"""


SELECT_INVITATION_TO_SHOW = """
SELECT i.role, i.email, i.expires_at, i.accepted_at, s.name AS sub_account_name
FROM control.invitations i
JOIN control.sub_accounts s ON s.id = i.sub_account_id
WHERE i.token_hash = $1 AND s.status = 'active'
"""


@dataclass(frozen=True)
class ShownInvitation:
    """What the invitation link's page shows: whom it invites where, and whether it still can."""

    sub_account_name: str
    email: str
    role: str
    expires_at: datetime
    state: str  # open, used or expired


async def show_invitation(pool: asyncpg.Pool, token: str) -> ShownInvitation | None:
    """The invitation of this token as its page shows it (None when unknown); changes nothing."""
    row = await pool.fetchrow(SELECT_INVITATION_TO_SHOW, hash_token(token))
    if row is None:
        return None
    state = (
        "used"
        if row["accepted_at"] is not None
        else "expired"
        if row["expires_at"] <= utcnow()
        else "open"
    )
    return ShownInvitation(
        row["sub_account_name"], row["email"], row["role"], row["expires_at"], state
    )


async def accept_invitation(
    pool: asyncpg.Pool, token: str, first_name: str | None, last_name: str | None
) -> dict[str, object]:
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(SELECT_INVITATION_FOR_UPDATE, hash_token(token))
        if row is None:
            raise APIError(404, "not_found", "invitation not found")
        if row["accepted_at"] is not None:
            raise APIError(410, "invitation_used", "the invitation was already accepted")
        if row["expires_at"] <= utcnow():
            raise APIError(410, "invitation_expired", "the invitation has expired")
        user_id = await conn.fetchval(
            UPSERT_USER,
            row["email"],
            first_name or row["first_name"],
            last_name or row["last_name"],
            row["phone"],
        )
        await conn.execute(UPSERT_MEMBERSHIP, user_id, row["sub_account_id"], row["role"])
        await conn.execute(MARK_ACCEPTED, row["id"], user_id)
    return {"user_id": user_id, "sub_account_id": row["sub_account_id"], "role": row["role"]}
