"""POST /functions/v1/create-subaccount-webhook: SPEC Group B and CONTRACT sections 2, 3, 5."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tenancy.keys import hash_token
from tests.factories import CREATE, create_plan, create_sub_account, make_agency, unique_email
from tests.helpers import count_sub_accounts, email_text, set_email_config, token_in


def parse_ts(value: str) -> datetime:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", value), value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# --- success --------------------------------------------------------------------------------


async def test_create_returns_201_with_every_field(client, agency):
    owner = unique_email("owner")
    response = await client.post(
        CREATE, json={"email": owner, "name": "Acme Dental"}, headers=agency.headers
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["success"] is True
    uuid.UUID(body["sub_account_id"])
    assert body["sub_account_slug"].startswith("acme-dental")
    assert str(uuid.UUID(body["invitation_token"])) == body["invitation_token"]
    expires = parse_ts(body["invitation_expires_at"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=7))) < timedelta(minutes=5)
    assert body["crm_connected"] is False
    assert body["plan"] is None
    assert "crm_error" not in body


async def test_create_makes_tenant_schema_with_zero_wallet(client, agency, pool):
    body = await create_sub_account(client, agency.headers)
    schema = await pool.fetchval(
        "SELECT schema_name FROM control.sub_accounts WHERE id = $1",
        uuid.UUID(body["sub_account_id"]),
    )
    assert schema == f"t_{uuid.UUID(body['sub_account_id']).hex}"
    exists = await pool.fetchval(
        "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema
    )
    assert exists == 1
    balance = await pool.fetchval(f'SELECT balance FROM "{schema}".wallet')
    assert balance == Decimal("0")


async def test_owner_invitation_is_stored_hashed_for_seven_days(client, agency, pool):
    owner = unique_email("Owner")
    body = await create_sub_account(client, agency.headers, email=owner)
    rows = await pool.fetch(
        "SELECT * FROM control.invitations WHERE sub_account_id = $1",
        uuid.UUID(body["sub_account_id"]),
    )
    assert len(rows) == 1
    row = rows[0]
    assert row["role"] == "sub_account_owner"
    assert row["email"] == owner.lower()
    assert row["accepted_at"] is None
    assert abs(row["expires_at"] - (datetime.now(UTC) + timedelta(days=7))) < timedelta(minutes=5)
    assert row["token_hash"] == hash_token(body["invitation_token"])
    token = body["invitation_token"]
    for value in dict(row).values():
        assert token not in str(value)
        if isinstance(value, bytes):
            assert token.encode() not in value


async def test_invitation_email_arrives_with_token(client, agency, mailbox):
    owner = unique_email("owner")
    body = await create_sub_account(client, agency.headers, email=owner, name="Mail Test Co")
    messages = mailbox.to(owner)
    assert len(messages) == 1
    assert token_in(messages[0]) == body["invitation_token"]
    assert "Mail Test Co" in messages[0]["Subject"]
    assert body["invitation_email_sent"] is True


async def test_invitation_email_uses_organisation_email_config(client, agency, pool, mailbox):
    await set_email_config(
        pool, agency.id, mailbox.host, mailbox.port, "Acme Agency <hello@acme-agency.example>"
    )
    owner = unique_email("owner")
    body = await create_sub_account(client, agency.headers, email=owner)
    [message] = mailbox.to(owner)
    assert message["From"] == "Acme Agency <hello@acme-agency.example>"
    sender = [mail_from for mail_from, rcpt, _ in mailbox.messages if owner in rcpt]
    assert sender == ["hello@acme-agency.example"]
    assert body["invitation_token"] in email_text(message)


async def test_invitation_email_uses_platform_config_without_one(client, agency, mailbox):
    owner = unique_email("owner")
    await create_sub_account(client, agency.headers, email=owner)
    [message] = mailbox.to(owner)
    assert "no-reply@switchboard.local" in message["From"]


async def test_plan_applies_limits_features_and_rebilling(client, agency, pool):
    plan = await create_plan(
        client,
        agency.headers,
        max_users=3,
        features={"voice": True, "campaigns": False},
        rebilling={
            "email_per_message": 0.01,
            "sms_per_message": 0.05,
            "call_per_minute": 0.12,
            "phone_number_monthly": 2.5,
        },
    )
    body = await create_sub_account(client, agency.headers, plan=plan["slug"])
    assert body["plan"] == plan["slug"]
    row = await pool.fetchrow(
        "SELECT s.max_users, s.features, s.rebilling, p.slug FROM control.sub_accounts AS s"
        " JOIN control.plans AS p ON p.id = s.plan_id WHERE s.id = $1",
        uuid.UUID(body["sub_account_id"]),
    )
    assert row["slug"] == plan["slug"]
    assert row["max_users"] == 3
    assert row["features"] == {"voice": True, "campaigns": False}
    assert {k: Decimal(str(v)) for k, v in row["rebilling"].items()} == {
        "email_per_message": Decimal("0.01"),
        "sms_per_message": Decimal("0.05"),
        "call_per_minute": Decimal("0.12"),
        "phone_number_monthly": Decimal("2.5"),
    }


async def test_unknown_plan_slug_is_404_and_writes_nothing(client, agency, pool):
    before = await count_sub_accounts(pool, agency.id)
    response = await client.post(
        CREATE,
        json={"email": unique_email(), "name": "X", "plan": "no-such-plan"},
        headers=agency.headers,
    )
    assert response.status_code == 404
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "not_found"
    assert await count_sub_accounts(pool, agency.id) == before


async def test_plan_of_another_organisation_is_404(client, agency, agency_second):
    plan = await create_plan(client, agency_second.headers)
    response = await client.post(
        CREATE,
        json={"email": unique_email(), "name": "X", "plan": plan["slug"]},
        headers=agency.headers,
    )
    assert response.status_code == 404


async def test_same_name_twice_gets_timestamp_suffix(client, agency):
    name = f"Clash {uuid.uuid4().hex[:8]}"
    first = await create_sub_account(client, agency.headers, name=name)
    second = await create_sub_account(client, agency.headers, name=name)
    assert first["sub_account_slug"] == name.lower().replace(" ", "-")
    assert second["sub_account_slug"] != first["sub_account_slug"]
    assert second["sub_account_slug"].startswith(first["sub_account_slug"] + "-")
    suffix = second["sub_account_slug"][len(first["sub_account_slug"]) + 1 :]
    assert re.fullmatch(r"\d{17}", suffix), suffix
    stamp = datetime.strptime(suffix[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    assert abs(stamp - datetime.now(UTC)) < timedelta(minutes=5)


async def test_location_name_wins_and_crm_connects(client, agency, pool):
    location = f"loc{uuid.uuid4().hex[:8]}"
    body = await create_sub_account(
        client, agency.headers, name="Ignored Name", locationID=location
    )
    assert body["crm_connected"] is True
    assert "crm_error" not in body
    assert body["sub_account_slug"].startswith(f"sandbox-location-{location}")
    row = await pool.fetchrow(
        "SELECT name, crm_connected, crm_location_id, crm_error"
        " FROM control.sub_accounts WHERE id = $1",
        uuid.UUID(body["sub_account_id"]),
    )
    assert row["name"] == f"Sandbox Location {location}"
    assert row["crm_connected"] is True
    assert row["crm_location_id"] == location
    assert row["crm_error"] is None


async def test_location_alone_is_enough(client, agency):
    location = f"loc{uuid.uuid4().hex[:8]}"
    response = await client.post(
        CREATE, json={"email": unique_email(), "locationID": location}, headers=agency.headers
    )
    assert response.status_code == 201
    assert (await response.get_json())["crm_connected"] is True


async def test_failed_location_still_creates_with_crm_error(client, agency, pool):
    before = await count_sub_accounts(pool, agency.id)
    body = await create_sub_account(
        client, agency.headers, name="Fallback Name", locationID=f"invalid-{uuid.uuid4().hex[:6]}"
    )
    assert body["crm_connected"] is False
    assert isinstance(body["crm_error"], str) and body["crm_error"]
    assert await count_sub_accounts(pool, agency.id) == before + 1
    row = await pool.fetchrow(
        "SELECT name, crm_connected, crm_error FROM control.sub_accounts WHERE id = $1",
        uuid.UUID(body["sub_account_id"]),
    )
    assert row["name"] == "Fallback Name"
    assert row["crm_connected"] is False
    assert row["crm_error"] == body["crm_error"]


async def test_failed_location_without_name_is_named_by_location(client, agency, pool):
    location = f"invalid-{uuid.uuid4().hex[:6]}"
    body = await create_sub_account(client, agency.headers, locationID=location)
    assert body["crm_connected"] is False and body["crm_error"]
    name = await pool.fetchval(
        "SELECT name FROM control.sub_accounts WHERE id = $1", uuid.UUID(body["sub_account_id"])
    )
    assert name == location


async def test_crm_connected_false_without_location(client, agency):
    body = await create_sub_account(client, agency.headers, name="No CRM")
    assert body["crm_connected"] is False
    assert "crm_error" not in body


# --- 400: bad input writes nothing ----------------------------------------------------------


BAD_BODIES = [
    pytest.param({"name": "No Email"}, "validation_error", id="missing-email"),
    pytest.param({"email": "", "name": "Empty Email"}, "validation_error", id="empty-email"),
    pytest.param({"email": "not-an-email", "name": "X"}, "validation_error", id="invalid-email"),
    pytest.param({"email": "a@b@c.com", "name": "X"}, "validation_error", id="two-ats"),
    pytest.param({"email": "owner@example.com"}, "validation_error", id="no-name-no-location"),
    pytest.param(
        {"email": "owner@example.com", "name": "   "}, "validation_error", id="blank-name"
    ),
    pytest.param({"email": 5, "name": "X"}, "validation_error", id="email-number"),
    pytest.param({"email": "owner@example.com", "name": 7}, "validation_error", id="name-number"),
    pytest.param({"email": "owner@example.com", "name": ["X"]}, "validation_error", id="name-list"),
    pytest.param(
        {"email": "owner@example.com", "locationID": 123}, "validation_error", id="location-number"
    ),
    pytest.param(
        {"email": "owner@example.com", "name": "X", "plan": True},
        "validation_error",
        id="plan-bool",
    ),
    pytest.param(
        [{"email": "owner@example.com", "name": "X"}], "validation_error", id="array-body"
    ),
    pytest.param("owner@example.com", "validation_error", id="string-body"),
    pytest.param(42, "validation_error", id="number-body"),
    pytest.param(None, "validation_error", id="null-body"),
]


@pytest.mark.parametrize(("body", "code"), BAD_BODIES)
async def test_bad_body_is_400_and_writes_nothing(client, agency, pool, body, code):
    before = await count_sub_accounts(pool)
    response = await client.post(CREATE, json=body, headers=agency.headers)
    assert response.status_code == 400
    payload = await response.get_json()
    assert payload["success"] is False
    assert payload["error"]["code"] == code
    assert payload["error"]["message"]
    assert await count_sub_accounts(pool, agency.id) == 0
    assert await count_sub_accounts(pool) == before


async def test_validation_error_lists_the_bad_field(client, agency):
    response = await client.post(CREATE, json={"email": 5, "name": "X"}, headers=agency.headers)
    details = (await response.get_json())["error"]["details"]
    assert [d["field"] for d in details] == ["email"]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"email": "a@example.com", "name": ',
        b"{not json}",
        b"",
        b"\xff\xfe{}",
        b'{"email": "a@example.com",}',
    ],
)
async def test_malformed_json_is_400_invalid_json(client, agency, pool, raw):
    response = await client.post(
        CREATE, data=raw, headers={**agency.headers, "content-type": "application/json"}
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["success"] is False
    assert body["error"]["code"] == "invalid_json"
    assert await count_sub_accounts(pool, agency.id) == 0


async def test_deeply_nested_json_is_400(client, agency, pool):
    raw = b'{"email": "a@example.com", "name": "X", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = await client.post(
        CREATE, data=raw, headers={**agency.headers, "content-type": "application/json"}
    )
    assert response.status_code == 400
    assert await count_sub_accounts(pool, agency.id) == 0


async def test_body_without_json_content_type_is_400(client, agency, pool):
    response = await client.post(
        CREATE,
        data=b'{"email": "a@example.com", "name": "X"}',
        headers={**agency.headers, "content-type": "text/plain"},
    )
    assert response.status_code == 400
    assert (await response.get_json())["success"] is False
    assert await count_sub_accounts(pool, agency.id) == 0


# --- 401 ------------------------------------------------------------------------------------


async def test_missing_key_is_401_missing_api_key(client, pool):
    before = await count_sub_accounts(pool)
    response = await client.post(CREATE, json={"email": unique_email(), "name": "X"})
    assert response.status_code == 401
    body = await response.get_json()
    assert body == {
        "success": False,
        "error": {"code": "missing_api_key", "message": body["error"]["message"]},
    }
    assert await count_sub_accounts(pool) == before


@pytest.mark.parametrize(
    "headers",
    [
        {"x-api-key": ""},
        {"x-api-key": "   "},
        {"authorization": "Basic dXNlcjpwYXNz"},
        {"authorization": "Bearer"},
        {"authorization": "Bearer   "},
        {"authorization": "Token sb_x"},
    ],
)
async def test_empty_key_or_other_scheme_counts_as_missing(client, headers):
    response = await client.post(
        CREATE, json={"email": unique_email(), "name": "X"}, headers=headers
    )
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "missing_api_key"


@pytest.mark.parametrize("key", ["sb_" + "x" * 43, "nonsense", "sb_short", "sk_" + "a" * 43])
async def test_unknown_key_is_401_invalid_api_key(client, pool, key):
    before = await count_sub_accounts(pool)
    response = await client.post(
        CREATE, json={"email": unique_email(), "name": "X"}, headers={"x-api-key": key}
    )
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "invalid_api_key"
    assert await count_sub_accounts(pool) == before


async def test_sub_account_key_on_agency_route_is_401(client, tenant, pool):
    before = await count_sub_accounts(pool)
    response = await client.post(
        CREATE, json={"email": unique_email(), "name": "X"}, headers=tenant.headers
    )
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "invalid_api_key"
    assert await count_sub_accounts(pool) == before


async def test_auth_is_checked_before_the_body(client):
    response = await client.post(
        CREATE, data=b"{broken", headers={"content-type": "application/json"}
    )
    assert response.status_code == 401


# --- 403 ------------------------------------------------------------------------------------


async def test_standard_plan_organisation_is_403_plan_not_allowed(client, pool):
    standard = await make_agency(pool, plan_type="standard")
    response = await client.post(
        CREATE, json={"email": unique_email(), "name": "X"}, headers=standard.headers
    )
    assert response.status_code == 403
    assert (await response.get_json())["error"]["code"] == "plan_not_allowed"
    assert await count_sub_accounts(pool, standard.id) == 0


async def test_saas_organisation_may_provision(client, pool):
    saas = await make_agency(pool, plan_type="saas")
    await create_sub_account(client, saas.headers)
    assert await count_sub_accounts(pool, saas.id) == 1


async def test_inactive_organisation_is_403_organisation_inactive(client, pool):
    inactive = await make_agency(pool, active=False)
    response = await client.post(
        CREATE, json={"email": unique_email(), "name": "X"}, headers=inactive.headers
    )
    assert response.status_code == 403
    assert (await response.get_json())["error"]["code"] == "organisation_inactive"
    assert await count_sub_accounts(pool, inactive.id) == 0


async def test_sub_account_limit_reached_is_403(client, pool):
    small = await make_agency(pool, max_sub_accounts=2)
    await create_sub_account(client, small.headers)
    await create_sub_account(client, small.headers)
    response = await client.post(
        CREATE, json={"email": unique_email(), "name": "Third"}, headers=small.headers
    )
    assert response.status_code == 403
    assert (await response.get_json())["error"]["code"] == "sub_account_limit_reached"
    assert await count_sub_accounts(pool, small.id) == 2


async def test_zero_max_sub_accounts_refuses_the_first(client, pool):
    none_allowed = await make_agency(pool, max_sub_accounts=0)
    response = await client.post(
        CREATE, json={"email": unique_email(), "name": "X"}, headers=none_allowed.headers
    )
    assert response.status_code == 403
    assert (await response.get_json())["error"]["code"] == "sub_account_limit_reached"


async def test_concurrent_creates_never_pass_max_sub_accounts(client, pool):
    limited = await make_agency(pool, max_sub_accounts=3)

    async def create(i: int) -> int:
        response = await client.post(
            CREATE, json={"email": unique_email(), "name": f"Race {i}"}, headers=limited.headers
        )
        return response.status_code

    statuses = await asyncio.gather(*(create(i) for i in range(12)))
    assert sorted(statuses) == [201] * 3 + [403] * 9
    assert await count_sub_accounts(pool, limited.id) == 3
    schemas = await pool.fetch(
        "SELECT schema_name FROM control.sub_accounts WHERE organisation_id = $1", limited.id
    )
    for row in schemas:
        assert (
            await pool.fetchval(
                "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                row["schema_name"],
            )
            == 1
        )


async def test_concurrent_creates_with_one_name_get_distinct_slugs(client, agency):
    name = f"Same {uuid.uuid4().hex[:6]}"

    async def create() -> dict:
        response = await client.post(
            CREATE, json={"email": unique_email(), "name": name}, headers=agency.headers
        )
        assert response.status_code == 201
        return await response.get_json()

    bodies = await asyncio.gather(*(create() for _ in range(4)))
    slugs = [body["sub_account_slug"] for body in bodies]
    assert len(set(slugs)) == 4
