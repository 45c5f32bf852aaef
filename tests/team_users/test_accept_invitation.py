"""POST /functions/v1/accept-invitation and GET /webhooks/inbound/team-users (CONTRACT 4)."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import ACCEPT, ADD_USER, create_sub_account, issue_key, unique_email
from tests.helpers import token_in


async def invite(client, tenant, mailbox, role="sub_account_admin", **extra) -> tuple[str, str]:
    email = unique_email("member")
    response = await client.post(ADD_USER, json={
        "email": email, "role": role, "sub_account_id": str(tenant.id), **extra},
        headers=tenant.organisation.headers)
    assert response.status_code == 201
    return email, token_in(mailbox.to(email)[-1])


async def test_accept_is_200_and_user_joins_team(client, tenant, mailbox, pool):
    email, token = await invite(client, tenant, mailbox, first_name="Grace")
    response = await client.post(ACCEPT, json={"token": token, "last_name": "Hopper"})
    assert response.status_code == 200
    body = await response.get_json()
    assert set(body) == {"success", "user_id", "sub_account_id", "role"}
    assert body["success"] is True
    assert body["sub_account_id"] == str(tenant.id)
    assert body["role"] == "sub_account_admin"
    uuid.UUID(body["user_id"])

    team = await client.get("/webhooks/inbound/team-users", headers=tenant.headers)
    assert team.status_code == 200
    listed = await team.get_json()
    assert listed["status"] == "success"
    assert listed["users"] == [{"id": body["user_id"], "email": email, "first_name": "Grace",
                                "last_name": "Hopper", "role": "sub_account_admin",
                                "is_active": True}]


async def test_owner_accepts_create_token(client, agency):
    created = await create_sub_account(client, agency.headers)
    response = await client.post(ACCEPT, json={"token": created["invitation_token"]})
    assert response.status_code == 200
    body = await response.get_json()
    assert body["role"] == "sub_account_owner"
    assert body["sub_account_id"] == created["sub_account_id"]
    key = await issue_key(client, agency.headers, created["sub_account_id"])
    team = await (await client.get("/webhooks/inbound/team-users",
                                   headers={"x-api-key": key})).get_json()
    assert [user["role"] for user in team["users"]] == ["sub_account_owner"]


async def test_team_users_shows_only_own_sub_account(client, tenant, tenant_second, mailbox):
    _, token = await invite(client, tenant, mailbox)
    await client.post(ACCEPT, json={"token": token})
    other = await client.get("/webhooks/inbound/team-users", headers=tenant_second.headers)
    assert (await other.get_json())["users"] == []


async def test_team_users_needs_sub_account_key(client, tenant):
    response = await client.get("/webhooks/inbound/team-users",
                                headers=tenant.organisation.headers)
    assert response.status_code == 401
    body = await response.get_json()
    assert body["status"] == "error" and body["error"]["code"] == "invalid_api_key"


async def test_second_accept_is_410_invitation_used(client, tenant, mailbox, pool):
    _, token = await invite(client, tenant, mailbox)
    assert (await client.post(ACCEPT, json={"token": token})).status_code == 200
    again = await client.post(ACCEPT, json={"token": token})
    assert again.status_code == 410
    body = await again.get_json()
    assert body["success"] is False and body["error"]["code"] == "invitation_used"
    members = await pool.fetchval(
        "SELECT count(*) FROM control.memberships WHERE sub_account_id = $1", tenant.id)
    assert members == 1


async def test_expired_invitation_is_410_invitation_expired(client, tenant, mailbox, pool):
    email, token = await invite(client, tenant, mailbox)
    await pool.execute("UPDATE control.invitations SET expires_at = now() - interval '1 second'"
                       " WHERE sub_account_id = $1 AND email = $2", tenant.id, email)
    response = await client.post(ACCEPT, json={"token": token})
    assert response.status_code == 410
    assert (await response.get_json())["error"]["code"] == "invitation_expired"
    assert await pool.fetchval(
        "SELECT count(*) FROM control.memberships WHERE sub_account_id = $1", tenant.id) == 0


async def test_expired_invitation_can_be_refreshed(client, tenant, mailbox, pool):
    email, token = await invite(client, tenant, mailbox)
    await pool.execute("UPDATE control.invitations SET expires_at = now() - interval '1 second'"
                       " WHERE sub_account_id = $1 AND email = $2", tenant.id, email)
    response = await client.post(ADD_USER, json={
        "email": email, "role": "sub_account_user", "sub_account_id": str(tenant.id)},
        headers=tenant.organisation.headers)
    assert response.status_code == 201
    fresh = token_in(mailbox.to(email)[-1])
    assert (await client.post(ACCEPT, json={"token": fresh})).status_code == 200


async def test_unknown_token_is_404(client):
    response = await client.post(ACCEPT, json={"token": str(uuid.uuid4())})
    assert response.status_code == 404
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "not_found"


@pytest.mark.parametrize("body", [{}, {"token": 5}, {"token": None}, {"token": "x" * 1000}, [],
                                  {"token": str(uuid.uuid4()), "first_name": 3}])
async def test_bad_accept_body_is_400(client, body):
    response = await client.post(ACCEPT, json=body)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "validation_error"


async def test_concurrent_accepts_make_one_member(client, tenant, mailbox, pool):
    import asyncio

    _, token = await invite(client, tenant, mailbox)
    responses = await asyncio.gather(*(client.post(ACCEPT, json={"token": token})
                                       for _ in range(5)))
    assert sorted(r.status_code for r in responses) == [200] + [410] * 4
    assert await pool.fetchval(
        "SELECT count(*) FROM control.memberships WHERE sub_account_id = $1", tenant.id) == 1
