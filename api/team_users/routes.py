"""GET /webhooks/inbound/team-users: the members of the key's sub-account."""

from __future__ import annotations

import uuid

from pydantic import BaseModel
from quart import Blueprint, current_app
from quart_schema import tag

from api.auth import SUB_ACCOUNT, principal, requires
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


SELECT_TEAM_USERS = """
SELECT u.id, u.email, u.first_name, u.last_name, m.role, m.is_active
FROM control.memberships AS m
JOIN control.users AS u ON u.id = m.user_id
WHERE m.sub_account_id = $1
ORDER BY u.email
"""


@blueprint.get("/team-users")
@tag(["Team Users"])
@requires(SUB_ACCOUNT)
@validate_response(TeamUsers, 200)
async def list_team_users() -> dict:
    """List the users who are members of this sub-account."""
    rows = await current_app.config["DB_POOL"].fetch(SELECT_TEAM_USERS,
                                                     principal().sub_account_id)
    return {"status": "success", "users": [dict(row) for row in rows]}
