"""GET /webhooks/inbound/team-users: the members of the key's sub-account."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel
from quart import Blueprint, current_app, request
from quart_schema import tag

from api.auth import SUB_ACCOUNT, principal, requires
from api.schemas import InboundError as Error
from api.types import page_body, pagination
from api.validation import validate_response

blueprint = Blueprint("team_users", __name__, url_prefix="/webhooks/inbound")


class TeamUser(BaseModel):
    id: uuid.UUID
    email: str
    first_name: str | None
    last_name: str | None
    role: str
    is_active: bool


class TeamUsers(BaseModel):
    status: str
    users: list[TeamUser]
    total: int
    limit: int
    offset: int
    has_more: bool


SELECT_TEAM_USERS = """
SELECT u.id, u.email, u.first_name, u.last_name, m.role, m.is_active
FROM control.memberships AS m
JOIN control.users AS u ON u.id = m.user_id
WHERE m.sub_account_id = $1
ORDER BY u.email, u.id
LIMIT $2 OFFSET $3
"""

COUNT_TEAM_USERS = "SELECT count(*) FROM control.memberships WHERE sub_account_id = $1"


@blueprint.get("/team-users")
@tag(["Team Users"])
@requires(SUB_ACCOUNT)
@validate_response(TeamUsers, 200)
@validate_response(Error, 400)
async def list_team_users() -> dict[str, Any]:
    """List the users who are members of this sub-account (general pagination rule)."""
    limit, offset = pagination(request.args)
    sub_account_id = principal().sub_account_id
    pool = current_app.config["DB_POOL"]
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
        rows = await conn.fetch(SELECT_TEAM_USERS, sub_account_id, limit, offset)
        total = await conn.fetchval(COUNT_TEAM_USERS, sub_account_id)
    return page_body("users", [dict(row) for row in rows], total, limit, offset)
