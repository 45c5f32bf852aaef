"""Agency rows of CONTRACT section 4: plans, sub-account list, API keys, wallet credit."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from tests.factories import PLANS, SUB_ACCOUNTS, create_plan, create_sub_account, make_agency

# --- plans ----------------------------------------------------------------------------------


async def test_create_plan_is_201(client, agency):
    response = await client.post(
        PLANS,
        json={
            "slug": "gold",
            "name": "Gold",
            "max_users": 10,
            "features": {"voice": True},
            "rebilling": {"sms_per_message": 0.05, "call_per_minute": 0.1},
        },
        headers=agency.headers,
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["success"] is True
    plan = body["plan"]
    uuid.UUID(plan["id"])
    assert (plan["slug"], plan["name"], plan["max_users"]) == ("gold", "Gold", 10)
    assert plan["features"] == {"voice": True}
    assert plan["rebilling"] == {"sms_per_message": 0.05, "call_per_minute": 0.1}
    assert plan["created_at"].endswith("Z")


async def test_create_plan_max_concurrent_calls_defaults_to_10(client, agency, pool):
    plan = await create_plan(client, agency.headers, slug="calls-default")
    assert plan["max_concurrent_calls"] == 10
    assert (
        await pool.fetchval(
            "SELECT max_concurrent_calls FROM control.plans WHERE id = $1", uuid.UUID(plan["id"])
        )
        == 10
    )


@pytest.mark.parametrize("value", [1, 25, 1000])
async def test_create_plan_max_concurrent_calls_is_stored_and_shown(client, agency, pool, value):
    plan = await create_plan(
        client, agency.headers, slug=f"calls-{value}", max_concurrent_calls=value
    )
    assert plan["max_concurrent_calls"] == value
    assert (
        await pool.fetchval(
            "SELECT max_concurrent_calls FROM control.plans WHERE id = $1", uuid.UUID(plan["id"])
        )
        == value
    )


@pytest.mark.parametrize("value", [0, -1, 1001, 10**26, "5", 2.5, True, None])
async def test_create_plan_max_concurrent_calls_out_of_bounds_is_400(client, agency, pool, value):
    response = await client.post(
        PLANS,
        json={"slug": "calls", "name": "Calls", "max_concurrent_calls": value},
        headers=agency.headers,
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"]["code"] == "validation_error"
    assert "max_concurrent_calls" in [detail["field"] for detail in body["error"]["details"]]
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.plans WHERE organisation_id = $1", agency.id
        )
        == 0
    )


async def test_plan_features_keep_fractional_numbers(client, agency, pool):
    plan = await create_plan(
        client,
        agency.headers,
        slug="ratio",
        features={"ratio": 1.5, "seats": 3, "nested": [{"x": 0.25}]},
    )
    assert plan["features"] == {"ratio": 1.5, "seats": 3, "nested": [{"x": 0.25}]}
    created = await create_sub_account(client, agency.headers, plan="ratio")
    stored = await pool.fetchval(
        "SELECT features FROM control.sub_accounts WHERE id = $1",
        uuid.UUID(created["sub_account_id"]),
    )
    assert stored == {"ratio": 1.5, "seats": 3, "nested": [{"x": 0.25}]}


@pytest.mark.parametrize("raw", [b"1e400", b"1e999999999", b"-1e20"])
async def test_plan_feature_number_out_of_range_is_400(client, agency, raw):
    body = b'{"slug": "big", "name": "Big", "features": {"n": ' + raw + b"}}"
    response = await client.post(
        PLANS, data=body, headers={**agency.headers, "content-type": "application/json"}
    )
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "validation_error"


async def test_duplicate_plan_slug_is_409(client, agency):
    await create_plan(client, agency.headers, slug="silver")
    response = await client.post(
        PLANS, json={"slug": "silver", "name": "Again"}, headers=agency.headers
    )
    assert response.status_code == 409
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "plan_slug_taken"


async def test_same_plan_slug_in_two_organisations_is_fine(client, agency, agency_second):
    await create_plan(client, agency.headers, slug="bronze")
    await create_plan(client, agency_second.headers, slug="bronze")


@pytest.mark.parametrize(
    "body",
    [
        {"name": "No slug"},
        {"slug": "Has Space", "name": "X"},
        {"slug": "ok"},
        {"slug": "ok", "name": ""},
        {"slug": "ok", "name": "X", "max_users": "5"},
        {"slug": "ok", "name": "X", "max_users": 0},
        {"slug": "ok", "name": "X", "features": []},
        {"slug": "ok", "name": "X", "rebilling": {"sms_per_message": "0.05"}},
        {"slug": "ok", "name": "X", "rebilling": {"sms_per_message": -1}},
    ],
)
async def test_bad_plan_body_is_400(client, agency, pool, body):
    response = await client.post(PLANS, json=body, headers=agency.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "validation_error"
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.plans WHERE organisation_id = $1", agency.id
        )
        == 0
    )


async def test_plans_need_agency_key(client, tenant):
    response = await client.post(PLANS, json={"slug": "x", "name": "X"}, headers=tenant.headers)
    assert response.status_code == 401


# --- sub-account list -----------------------------------------------------------------------


async def test_list_pages_with_total_and_has_more(client, pool):
    agency = await make_agency(pool)
    created = [await create_sub_account(client, agency.headers, name=f"List {i}") for i in range(5)]
    first = await (await client.get(f"{SUB_ACCOUNTS}?limit=2", headers=agency.headers)).get_json()
    assert first["success"] is True
    assert (first["total"], first["limit"], first["offset"], first["has_more"]) == (5, 2, 0, True)
    assert len(first["sub_accounts"]) == 2
    seen = []
    offset = 0
    while True:
        page = await (
            await client.get(f"{SUB_ACCOUNTS}?limit=2&offset={offset}", headers=agency.headers)
        ).get_json()
        seen += [item["id"] for item in page["sub_accounts"]]
        if not page["has_more"]:
            break
        offset += 2
    assert sorted(seen) == sorted(c["sub_account_id"] for c in created)
    # Newest first.
    assert seen[0] == created[-1]["sub_account_id"]
    last = await (
        await client.get(f"{SUB_ACCOUNTS}?limit=2&offset=4", headers=agency.headers)
    ).get_json()
    assert (len(last["sub_accounts"]), last["has_more"], last["total"]) == (1, False, 5)
    beyond = await (
        await client.get(f"{SUB_ACCOUNTS}?offset=10", headers=agency.headers)
    ).get_json()
    assert (beyond["sub_accounts"], beyond["total"], beyond["has_more"]) == ([], 5, False)


async def test_list_item_fields(client, agency):
    plan = await create_plan(client, agency.headers)
    created = await create_sub_account(client, agency.headers, name="Fields Co", plan=plan["slug"])
    body = await (await client.get(SUB_ACCOUNTS, headers=agency.headers)).get_json()
    [item] = body["sub_accounts"]
    assert item["id"] == created["sub_account_id"]
    assert item["name"] == "Fields Co"
    assert item["slug"] == created["sub_account_slug"]
    assert item["plan"] == plan["slug"]
    assert item["status"] == "active"
    assert item["crm_connected"] is False
    assert body["limit"] == 50 and body["offset"] == 0


async def test_list_shows_only_own_organisation(client, tenant, tenant_second):
    body = await (await client.get(SUB_ACCOUNTS, headers=tenant.organisation.headers)).get_json()
    assert [item["id"] for item in body["sub_accounts"]] == [str(tenant.id)]
    assert body["total"] == 1


@pytest.mark.parametrize(
    "query",
    [
        "limit=101",
        "limit=0",
        "limit=-1",
        "offset=-1",
        "limit=abc",
        "offset=x",
        "limit=1.5",
        "limit=1_0",
        "limit=%D9%A5",
        "limit=%205",
        "offset=100000000000000000000",
        "limit=99999999999999999999999",
    ],
)
async def test_list_bad_paging_is_400(client, agency, query):
    response = await client.get(f"{SUB_ACCOUNTS}?{query}", headers=agency.headers)
    assert response.status_code == 400
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "validation_error"


async def test_list_limit_100_is_allowed(client, agency):
    response = await client.get(f"{SUB_ACCOUNTS}?limit=100", headers=agency.headers)
    assert response.status_code == 200


async def test_list_large_offset_is_an_empty_page(client, tenant):
    response = await client.get(
        f"{SUB_ACCOUNTS}?offset=999999999999999999", headers=tenant.organisation.headers
    )
    assert response.status_code == 200
    body = await response.get_json()
    assert (body["sub_accounts"], body["total"], body["has_more"]) == ([], 1, False)


# --- sub-account API keys -------------------------------------------------------------------


async def test_issue_key_is_201_and_key_works(client, tenant):
    response = await client.post(
        f"{SUB_ACCOUNTS}/{tenant.id}/api-keys", headers=tenant.organisation.headers
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["success"] is True
    uuid.UUID(body["key_id"])
    assert body["api_key"].startswith("sb_")
    team = await client.get("/webhooks/inbound/team-users", headers={"x-api-key": body["api_key"]})
    assert team.status_code == 200


async def test_issue_key_for_another_organisations_sub_account_is_404(
    client, agency, tenant_second, pool
):
    before = await pool.fetchval(
        "SELECT count(*) FROM control.api_keys WHERE sub_account_id = $1", tenant_second.id
    )
    response = await client.post(
        f"{SUB_ACCOUNTS}/{tenant_second.id}/api-keys", headers=agency.headers
    )
    assert response.status_code == 404
    assert (await response.get_json())["error"]["code"] == "not_found"
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.api_keys WHERE sub_account_id = $1", tenant_second.id
        )
        == before
    )


async def test_issue_key_unknown_sub_account_is_404(client, agency):
    response = await client.post(f"{SUB_ACCOUNTS}/{uuid.uuid4()}/api-keys", headers=agency.headers)
    assert response.status_code == 404


async def test_issue_key_non_uuid_is_400_invalid_uuid(client, agency):
    response = await client.post(f"{SUB_ACCOUNTS}/not-a-uuid/api-keys", headers=agency.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "invalid_uuid"


# --- wallet credit --------------------------------------------------------------------------


def credit_url(sub_account_id: object) -> str:
    return f"{SUB_ACCOUNTS}/{sub_account_id}/wallet/credit"


async def wallet_balance(pool, tenant) -> Decimal:
    return await pool.fetchval(f'SELECT balance FROM "{tenant.schema}".wallet')  # type: ignore


async def test_credit_is_200_with_balance(client, tenant, pool):
    response = await client.post(
        credit_url(tenant.id),
        json={"amount": 25.5, "description": "top-up"},
        headers=tenant.organisation.headers,
    )
    assert response.status_code == 200
    assert await response.get_json() == {"success": True, "balance": 25.5}
    again = await client.post(
        credit_url(tenant.id), json={"amount": 0.1}, headers=tenant.organisation.headers
    )
    assert (await again.get_json())["balance"] == 25.6
    assert await wallet_balance(pool, tenant) == Decimal("25.60")
    ledger = await pool.fetch(
        f"SELECT amount, balance_after, description FROM"
        f' "{tenant.schema}".wallet_transactions ORDER BY created_at'
    )
    assert [(r["amount"], r["balance_after"]) for r in ledger] == [
        (Decimal("25.50"), Decimal("25.50")),
        (Decimal("0.10"), Decimal("25.60")),
    ]
    assert ledger[0]["description"] == "top-up"


async def test_credit_integer_amount(client, tenant):
    response = await client.post(
        credit_url(tenant.id), json={"amount": 10}, headers=tenant.organisation.headers
    )
    assert (await response.get_json())["balance"] == 10


@pytest.mark.parametrize(
    "body",
    [
        {"amount": "10.00"},
        {"amount": "10"},
        {"amount": -5},
        {"amount": 0},
        {"amount": 0.0},
        {"amount": 1.005},
        {"amount": 10.123},
        {"amount": True},
        {"amount": None},
        {},
        {"amount": 1_000_001},
        {"amount": 5, "description": 7},
        [5],
    ],
)
async def test_bad_credit_is_400_and_changes_nothing(client, tenant, pool, body):
    response = await client.post(
        credit_url(tenant.id), json=body, headers=tenant.organisation.headers
    )
    assert response.status_code == 400
    payload = await response.get_json()
    assert payload["success"] is False and payload["error"]["code"] == "validation_error"
    assert await wallet_balance(pool, tenant) == Decimal("0")


async def test_credit_huge_exponent_is_400(client, tenant, pool):
    response = await client.post(
        credit_url(tenant.id),
        data=b'{"amount": 1e999999999}',
        headers={**tenant.organisation.headers, "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert await wallet_balance(pool, tenant) == Decimal("0")


async def test_credit_another_organisations_sub_account_is_404(client, agency, tenant_second, pool):
    response = await client.post(
        credit_url(tenant_second.id), json={"amount": 5}, headers=agency.headers
    )
    assert response.status_code == 404
    assert (await response.get_json())["error"]["code"] == "not_found"
    assert await wallet_balance(pool, tenant_second) == Decimal("0")


async def test_credit_unknown_or_non_uuid_sub_account(client, agency):
    unknown = await client.post(
        credit_url(uuid.uuid4()), json={"amount": 5}, headers=agency.headers
    )
    assert unknown.status_code == 404
    bad = await client.post(credit_url("nope"), json={"amount": 5}, headers=agency.headers)
    assert bad.status_code == 400
    assert (await bad.get_json())["error"]["code"] == "invalid_uuid"


async def test_credit_needs_agency_key(client, tenant):
    response = await client.post(credit_url(tenant.id), json={"amount": 5}, headers=tenant.headers)
    assert response.status_code == 401


async def test_a_deleted_sub_account_is_404_to_keys_credit_and_invitations(
    client, pool, agency, tenant
):
    from tenancy import tenant_ops

    await tenant_ops.delete(pool, tenant.id, grace_days=7)
    key = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant.id}/api-keys", headers=agency.headers
    )
    credit = await client.post(credit_url(tenant.id), json={"amount": 5}, headers=agency.headers)
    invite = await client.post(
        "/functions/v1/crm-api/add-subaccount-user",
        json={
            "email": "late@example.com",
            "role": "sub_account_user",
            "sub_account_id": str(tenant.id),
        },
        headers=agency.headers,
    )
    assert key.status_code == credit.status_code == invite.status_code == 404
