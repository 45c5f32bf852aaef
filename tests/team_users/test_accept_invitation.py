"""POST /functions/v1/accept-invitation and GET /webhooks/inbound/team-users (CONTRACT 4)."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import ACCEPT, ADD_USER, create_sub_account, issue_key, unique_email
from tests.helpers import token_in


async def invite(client, tenant, mailbox, role="sub_account_admin", **extra) -> tuple[str, str]:
    email = unique_email("member")
    response = await client.post(
        ADD_USER,
        json={"email": email, "role": role, "sub_account_id": str(tenant.id), **extra},
        headers=tenant.organisation.headers,
    )
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
    assert listed["users"] == [
        {
            "id": body["user_id"],
            "email": email,
            "first_name": "Grace",
            "last_name": "Hopper",
            "role": "sub_account_admin",
            "is_active": True,
        }
    ]


async def test_owner_accepts_create_token(client, agency):
    created = await create_sub_account(client, agency.headers)
    response = await client.post(ACCEPT, json={"token": created["invitation_token"]})
    assert response.status_code == 200
    body = await response.get_json()
    assert body["role"] == "sub_account_owner"
    assert body["sub_account_id"] == created["sub_account_id"]
    key = await issue_key(client, agency.headers, created["sub_account_id"])
    team = await (
        await client.get("/webhooks/inbound/team-users", headers={"x-api-key": key})
    ).get_json()
    assert [user["role"] for user in team["users"]] == ["sub_account_owner"]


async def test_team_users_shows_only_own_sub_account(client, tenant, tenant_second, mailbox):
    _, token = await invite(client, tenant, mailbox)
    await client.post(ACCEPT, json={"token": token})
    other = await client.get("/webhooks/inbound/team-users", headers=tenant_second.headers)
    assert (await other.get_json())["users"] == []


async def test_team_users_needs_sub_account_key(client, tenant):
    response = await client.get("/webhooks/inbound/team-users", headers=tenant.organisation.headers)
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
        "SELECT count(*) FROM control.memberships WHERE sub_account_id = $1", tenant.id
    )
    assert members == 1


async def test_expired_invitation_is_410_invitation_expired(client, tenant, mailbox, pool):
    email, token = await invite(client, tenant, mailbox)
    await pool.execute(
        "UPDATE control.invitations SET expires_at = now() - interval '1 second'"
        " WHERE sub_account_id = $1 AND email = $2",
        tenant.id,
        email,
    )
    response = await client.post(ACCEPT, json={"token": token})
    assert response.status_code == 410
    assert (await response.get_json())["error"]["code"] == "invitation_expired"
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.memberships WHERE sub_account_id = $1", tenant.id
        )
        == 0
    )


async def test_expired_invitation_can_be_refreshed(client, tenant, mailbox, pool):
    email, token = await invite(client, tenant, mailbox)
    await pool.execute(
        "UPDATE control.invitations SET expires_at = now() - interval '1 second'"
        " WHERE sub_account_id = $1 AND email = $2",
        tenant.id,
        email,
    )
    response = await client.post(
        ADD_USER,
        json={"email": email, "role": "sub_account_user", "sub_account_id": str(tenant.id)},
        headers=tenant.organisation.headers,
    )
    assert response.status_code == 201
    fresh = token_in(mailbox.to(email)[-1])
    assert (await client.post(ACCEPT, json={"token": fresh})).status_code == 200


async def test_unknown_token_is_404(client):
    response = await client.post(ACCEPT, json={"token": str(uuid.uuid4())})
    assert response.status_code == 404
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"token": 5},
        {"token": None},
        {"token": "x" * 1000},
        [],
        {"token": str(uuid.uuid4()), "first_name": 3},
    ],
)
async def test_bad_accept_body_is_400(client, body):
    response = await client.post(ACCEPT, json=body)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "validation_error"


async def test_concurrent_accepts_make_one_member(client, tenant, mailbox, pool):
    import asyncio

    _, token = await invite(client, tenant, mailbox)
    responses = await asyncio.gather(
        *(client.post(ACCEPT, json={"token": token}) for _ in range(5))
    )
    assert sorted(r.status_code for r in responses) == [200] + [410] * 4
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.memberships WHERE sub_account_id = $1", tenant.id
        )
        == 1
    )


# --- the link in the invitation email answers a browser --------------------------------------


def link_in(message) -> str:
    from tests.helpers import email_text

    [link] = [word for word in email_text(message).split() if "/accept-invitation?token=" in word]
    return link


async def test_the_emailed_link_opens_a_page_that_accepts_the_invitation(
    client, tenant, mailbox, pool
):
    # given an invitation email, when a browser opens its link
    email, token = await invite(client, tenant, mailbox)
    link = link_in(mailbox.to(email)[-1])
    assert link.endswith(f"/functions/v1/accept-invitation?token={token}")
    path = link[link.index("/functions/") :]
    page = await client.get(path)
    # then it shows the invitation with a form that POSTs the token, and accepts nothing itself
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    html = await page.get_data(as_text=True)
    assert "Accept the invitation" in html and email in html and "sub account admin" in html
    assert f'token: "{token}"' in html
    assert (
        await pool.fetchval("SELECT accepted_at FROM control.invitations WHERE email = $1", email)
        is None
    )
    # and the POST the page makes accepts it
    assert (await client.post(ACCEPT, json={"token": token})).status_code == 200


async def test_the_link_of_a_used_invitation_says_so_with_410(client, tenant, mailbox):
    email, token = await invite(client, tenant, mailbox)
    await client.post(ACCEPT, json={"token": token})
    page = await client.get(f"{ACCEPT}?token={token}")
    assert page.status_code == 410
    assert "already accepted" in await page.get_data(as_text=True)


async def test_the_link_of_an_expired_invitation_says_so_with_410(client, tenant, mailbox, pool):
    email, token = await invite(client, tenant, mailbox)
    await pool.execute(
        "UPDATE control.invitations SET expires_at = now() - interval '1 minute' WHERE email = $1",
        email,
    )
    page = await client.get(f"{ACCEPT}?token={token}")
    assert page.status_code == 410
    assert "expired" in await page.get_data(as_text=True)


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?token=",
        "?token=nope",
        "?token=" + "x" * 500,
        "?token=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    ],
)
async def test_an_unknown_invitation_link_is_a_404_page_that_echoes_nothing(client, query):
    page = await client.get(f"{ACCEPT}{query}")
    assert page.status_code == 404
    html = await page.get_data(as_text=True)
    assert "not valid" in html and "<script>alert" not in html


async def test_the_page_escapes_what_it_shows(client, agency, pool):
    created = await create_sub_account(client, agency.headers, name="Acme <b>&</b> Sons")
    page = await client.get(f"{ACCEPT}?token={created['invitation_token']}")
    html = await page.get_data(as_text=True)
    assert "Acme &lt;b&gt;&amp;&lt;/b&gt; Sons" in html and "<b>&</b>" not in html
