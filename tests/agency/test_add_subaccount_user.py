"""POST /functions/v1/crm-api/add-subaccount-user: SPEC Group B and CONTRACT section 5."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tenancy.keys import hash_token
from tests.factories import (
    ACCEPT,
    ADD_USER,
    create_plan,
    create_sub_account,
    make_agency,
    unique_email,
)
from tests.helpers import closed_port, email_text, set_email_config, token_in


def invite_body(sub_account: object, /, **overrides: object) -> dict:
    body = {
        "email": unique_email("member"),
        "role": "sub_account_user",
        "sub_account_id": str(sub_account),
    }
    body.update(overrides)
    return body


async def open_invitations(pool, sub_account_id, email):
    return await pool.fetch(
        "SELECT * FROM control.invitations WHERE sub_account_id = $1 AND email = $2"
        " AND accepted_at IS NULL",
        sub_account_id,
        email,
    )


async def invitation_count(pool, sub_account_id) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM control.invitations WHERE sub_account_id = $1", sub_account_id
        )
    )


async def test_invite_is_201_and_email_arrives_with_token(client, tenant, pool, mailbox):
    body = invite_body(tenant.id, first_name="Ada", last_name="Lovelace")
    response = await client.post(ADD_USER, json=body, headers=tenant.organisation.headers)
    assert response.status_code == 201
    answer = await response.get_json()
    assert set(answer) == {"success", "message", "invitation_id", "expires_at"}
    assert answer["success"] is True
    assert isinstance(answer["message"], str) and answer["message"]
    expires = datetime.fromisoformat(answer["expires_at"].replace("Z", "+00:00"))
    assert abs(expires - (datetime.now(UTC) + timedelta(days=7))) < timedelta(minutes=5)
    [message] = mailbox.to(body["email"])
    token = token_in(message)
    assert "Hello Ada," in email_text(message)
    [row] = await open_invitations(pool, tenant.id, body["email"])
    assert row["id"] == uuid.UUID(answer["invitation_id"])
    assert row["token_hash"] == hash_token(token)
    assert row["role"] == "sub_account_user"
    assert (row["first_name"], row["last_name"]) == ("Ada", "Lovelace")


async def test_invite_stores_email_lowercased(client, tenant, pool, mailbox):
    address = f"Mixed.Case-{uuid.uuid4().hex[:8]}@Example.COM"
    response = await client.post(
        ADD_USER, json=invite_body(tenant.id, email=address), headers=tenant.organisation.headers
    )
    assert response.status_code == 201
    assert len(await open_invitations(pool, tenant.id, address.lower())) == 1
    assert len(mailbox.to(address.lower())) == 1


async def test_invite_stores_phone(client, tenant, pool):
    body = invite_body(tenant.id, phone="+14155550123")
    await client.post(ADD_USER, json=body, headers=tenant.organisation.headers)
    [row] = await open_invitations(pool, tenant.id, body["email"])
    assert row["phone"] == "+14155550123"


async def test_repeat_invite_refreshes_instead_of_duplicating(client, tenant, pool, mailbox):
    body = invite_body(tenant.id, role="sub_account_user", first_name="Old")
    first = await client.post(ADD_USER, json=body, headers=tenant.organisation.headers)
    first_answer = await first.get_json()
    old_token = token_in(mailbox.to(body["email"])[0])
    await pool.execute(
        "UPDATE control.invitations SET expires_at = now() + interval '1 day' WHERE id = $1",
        uuid.UUID(first_answer["invitation_id"]),
    )

    again = {**body, "role": "sub_account_admin", "first_name": "New"}
    second = await client.post(ADD_USER, json=again, headers=tenant.organisation.headers)
    assert second.status_code == 201
    second_answer = await second.get_json()
    assert second_answer["invitation_id"] == first_answer["invitation_id"]

    [row] = await open_invitations(pool, tenant.id, body["email"])
    assert row["role"] == "sub_account_admin"
    assert row["first_name"] == "New"
    assert row["expires_at"] > datetime.now(UTC) + timedelta(days=6)
    messages = mailbox.to(body["email"])
    assert len(messages) == 2
    new_token = token_in(messages[1])
    assert new_token != old_token
    assert row["token_hash"] == hash_token(new_token)

    stale = await client.post(ACCEPT, json={"token": old_token})
    assert stale.status_code == 404
    fresh = await client.post(ACCEPT, json={"token": new_token})
    assert fresh.status_code == 200
    assert (await fresh.get_json())["role"] == "sub_account_admin"


async def test_repeat_invite_in_other_case_refreshes(client, tenant, pool):
    address = f"case-{uuid.uuid4().hex[:8]}@example.com"
    for variant in (address, address.upper()):
        response = await client.post(
            ADD_USER,
            json=invite_body(tenant.id, email=variant),
            headers=tenant.organisation.headers,
        )
        assert response.status_code == 201
    assert len(await open_invitations(pool, tenant.id, address)) == 1


async def test_concurrent_invites_of_one_address_leave_one_open_invitation(
    client, tenant, pool, mailbox
):
    body = invite_body(tenant.id)
    responses = await asyncio.gather(
        *(client.post(ADD_USER, json=body, headers=tenant.organisation.headers) for _ in range(5))
    )
    assert [r.status_code for r in responses] == [201] * 5
    [row] = await open_invitations(pool, tenant.id, body["email"])
    tokens = [token_in(message) for message in mailbox.to(body["email"])]
    assert len(tokens) == 5
    assert [hash_token(t) for t in tokens].count(row["token_hash"]) == 1


async def test_user_limit_reached_is_403(client, agency, pool):
    plan = await create_plan(client, agency.headers, max_users=2)
    created = await create_sub_account(client, agency.headers, plan=plan["slug"])
    sub_account_id = uuid.UUID(created["sub_account_id"])
    # The owner invitation takes the first seat; one more fits.
    ok = await client.post(ADD_USER, json=invite_body(sub_account_id), headers=agency.headers)
    assert ok.status_code == 201
    before = await invitation_count(pool, sub_account_id)
    refused = await client.post(ADD_USER, json=invite_body(sub_account_id), headers=agency.headers)
    assert refused.status_code == 403
    assert (await refused.get_json())["error"]["code"] == "user_limit_reached"
    assert await invitation_count(pool, sub_account_id) == before


async def test_refresh_is_allowed_at_the_user_limit(client, agency):
    plan = await create_plan(client, agency.headers, max_users=2)
    created = await create_sub_account(client, agency.headers, plan=plan["slug"])
    body = invite_body(created["sub_account_id"])
    assert (await client.post(ADD_USER, json=body, headers=agency.headers)).status_code == 201
    again = await client.post(ADD_USER, json=body, headers=agency.headers)
    assert again.status_code == 201


async def test_concurrent_invites_never_pass_the_user_limit(client, agency, pool):
    plan = await create_plan(client, agency.headers, max_users=3)
    created = await create_sub_account(client, agency.headers, plan=plan["slug"])
    sub_account_id = uuid.UUID(created["sub_account_id"])

    async def invite() -> int:
        response = await client.post(
            ADD_USER, json=invite_body(sub_account_id), headers=agency.headers
        )
        return response.status_code

    statuses = await asyncio.gather(*(invite() for _ in range(8)))
    assert sorted(statuses) == [201] * 2 + [403] * 6
    assert await invitation_count(pool, sub_account_id) == 3


async def test_sub_account_of_another_organisation_is_403(client, agency, tenant_second, pool):
    before = await invitation_count(pool, tenant_second.id)
    response = await client.post(
        ADD_USER, json=invite_body(tenant_second.id), headers=agency.headers
    )
    assert response.status_code == 403
    assert (await response.get_json())["error"]["code"] == "forbidden"
    assert await invitation_count(pool, tenant_second.id) == before


async def test_unknown_sub_account_is_404(client, agency):
    response = await client.post(ADD_USER, json=invite_body(uuid.uuid4()), headers=agency.headers)
    assert response.status_code == 404
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    "value",
    [
        "not-a-uuid",
        "12345",
        "2c9d7e1f-8a3b-4c5d-9e6f-0a1b2c3d4e5z",
        "2c9d7e1f8a3b4c5d9e6f0a1b2c3d4e5f",
    ],
)
async def test_non_uuid_sub_account_id_is_400_invalid_uuid(client, agency, value):
    response = await client.post(ADD_USER, json=invite_body(value), headers=agency.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "invalid_uuid"


@pytest.mark.parametrize(
    ("change", "missing"),
    [
        ({"role": "sub_account_superuser"}, None),
        ({"role": "owner"}, None),
        ({"role": ""}, None),
        ({"email": "not-an-email"}, None),
        ({"email": "a@"}, None),
        ({"email": ""}, None),
        ({"email": 3}, None),
        ({"role": 1}, None),
        ({"sub_account_id": 12}, None),
        ({"first_name": 5}, None),
        ({}, "email"),
        ({}, "role"),
        ({}, "sub_account_id"),
    ],
)
async def test_bad_invite_body_is_400_and_writes_nothing(client, tenant, pool, change, missing):
    body = invite_body(tenant.id, **change)
    if missing:
        body.pop(missing)
    before = await invitation_count(pool, tenant.id)
    response = await client.post(ADD_USER, json=body, headers=tenant.organisation.headers)
    assert response.status_code == 400
    payload = await response.get_json()
    assert payload["success"] is False
    assert payload["error"]["code"] in ("validation_error", "invalid_uuid")
    assert await invitation_count(pool, tenant.id) == before


async def test_malformed_json_is_400_invalid_json(client, tenant):
    response = await client.post(
        ADD_USER,
        data=b'{"email": ',
        headers={**tenant.organisation.headers, "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "invalid_json"


async def test_missing_key_is_401(client, tenant):
    response = await client.post(ADD_USER, json=invite_body(tenant.id))
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "missing_api_key"


async def test_sub_account_key_is_401(client, tenant):
    response = await client.post(ADD_USER, json=invite_body(tenant.id), headers=tenant.headers)
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "invalid_api_key"


async def test_email_failure_is_502_with_token_and_invitation_kept(client, pool, mailbox):
    agency = await make_agency(pool)
    created = await create_sub_account(client, agency.headers)
    await set_email_config(
        pool, agency.id, "127.0.0.1", closed_port(), "Broken <broken@agency.example>"
    )
    body = invite_body(created["sub_account_id"])
    response = await client.post(ADD_USER, json=body, headers=agency.headers)
    assert response.status_code == 502
    answer = await response.get_json()
    assert set(answer) == {"success", "error", "invitation_token"}
    assert answer["success"] is False
    assert answer["error"]["code"] == "email_delivery_failed"
    token = answer["invitation_token"]
    assert str(uuid.UUID(token)) == token
    [row] = await open_invitations(pool, uuid.UUID(created["sub_account_id"]), body["email"])
    assert row["token_hash"] == hash_token(token)
    assert mailbox.to(body["email"]) == []
    accepted = await client.post(ACCEPT, json={"token": token})
    assert accepted.status_code == 200


async def test_create_with_email_down_still_creates_and_returns_token(client, pool):
    agency = await make_agency(pool)
    await set_email_config(
        pool, agency.id, "127.0.0.1", closed_port(), "Broken <broken@agency.example>"
    )
    created = await create_sub_account(client, agency.headers)
    assert created["invitation_email_sent"] is False
    accepted = await client.post(ACCEPT, json={"token": created["invitation_token"]})
    assert accepted.status_code == 200
    assert (await accepted.get_json())["role"] == "sub_account_owner"


async def test_inviting_an_active_member_is_409(client, tenant, mailbox, pool):
    body = invite_body(tenant.id)
    await client.post(ADD_USER, json=body, headers=tenant.organisation.headers)
    token = token_in(mailbox.to(body["email"])[0])
    assert (await client.post(ACCEPT, json={"token": token})).status_code == 200
    before = await invitation_count(pool, tenant.id)
    response = await client.post(ADD_USER, json=body, headers=tenant.organisation.headers)
    assert response.status_code == 409
    assert (await response.get_json())["error"]["code"] == "user_already_member"
    assert await invitation_count(pool, tenant.id) == before
