"""Keys and authentication: CONTRACT section 2 and SPEC Authentication."""

from __future__ import annotations

import pytest

from tenancy.keys import hash_key
from tests.factories import SUB_ACCOUNTS

TEAM = "/webhooks/inbound/team-users"


async def test_x_api_key_header_works(client, tenant):
    response = await client.get(TEAM, headers={"x-api-key": tenant.key})
    assert response.status_code == 200


async def test_bearer_authorization_works(client, tenant):
    response = await client.get(TEAM, headers={"authorization": f"Bearer {tenant.key}"})
    assert response.status_code == 200


async def test_bearer_scheme_is_case_insensitive(client, tenant):
    response = await client.get(TEAM, headers={"authorization": f"bearer {tenant.key}"})
    assert response.status_code == 200


async def test_agency_key_as_bearer_works(client, agency):
    response = await client.get(SUB_ACCOUNTS, headers={"authorization": f"Bearer {agency.key}"})
    assert response.status_code == 200


async def test_keys_look_like_sb_and_32_plus_characters(tenant, agency):
    for key in (tenant.key, agency.key):
        assert key.startswith("sb_")
        assert len(key) - 3 >= 32
        assert key.isascii() and " " not in key


async def test_each_issued_key_is_distinct(client, tenant):
    keys = set()
    for _ in range(3):
        response = await client.post(
            f"{SUB_ACCOUNTS}/{tenant.id}/api-keys", headers=tenant.organisation.headers
        )
        keys.add((await response.get_json())["api_key"])
    assert len(keys) == 3 and tenant.key not in keys


async def test_api_keys_table_holds_no_plaintext(pool, tenant, agency):
    rows = await pool.fetch(
        "SELECT * FROM control.api_keys WHERE organisation_id IN ($1, $2)",
        tenant.organisation.id,
        agency.id,
    )
    assert rows
    for key in (tenant.key, agency.key):
        secret = key[3:]
        for row in rows:
            for value in dict(row).values():
                text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
                assert key not in text
                assert secret[10:] not in text
                if isinstance(value, bytes):
                    assert key.encode() not in value
    hashes = {row["key_hash"] for row in rows}
    assert hash_key(tenant.key) in hashes and hash_key(agency.key) in hashes


async def test_agency_key_on_sub_account_route_is_401(client, agency, tenant):
    response = await client.get(TEAM, headers=agency.headers)
    assert response.status_code == 401
    body = await response.get_json()
    assert body == {
        "status": "error",
        "error": {"code": "invalid_api_key", "message": body["error"]["message"]},
    }


async def test_sub_account_key_on_agency_route_is_401(client, tenant):
    response = await client.get(SUB_ACCOUNTS, headers=tenant.headers)
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "invalid_api_key"


async def test_missing_key_on_sub_account_route_is_401(client):
    response = await client.get(TEAM)
    assert response.status_code == 401
    body = await response.get_json()
    assert body["status"] == "error" and body["error"]["code"] == "missing_api_key"


@pytest.mark.parametrize(
    "headers",
    [
        {"x-api-key": ""},
        {"authorization": "Basic Zm9vOmJhcg=="},
        {"authorization": ""},
        {"authorization": "Bearer "},
        {"authorization": "Digest sb_x"},
    ],
)
async def test_empty_key_or_other_scheme_is_missing(client, headers):
    response = await client.get(TEAM, headers=headers)
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "missing_api_key"


async def test_key_with_one_character_changed_is_401(client, tenant):
    tampered = tenant.key[:-1] + ("A" if tenant.key[-1] != "A" else "B")
    response = await client.get(TEAM, headers={"x-api-key": tampered})
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "invalid_api_key"


async def test_key_with_trailing_garbage_is_401(client, tenant):
    response = await client.get(TEAM, headers={"x-api-key": tenant.key + "x"})
    assert response.status_code == 401


async def test_revoked_key_is_401(client, tenant, pool):
    await pool.execute(
        "UPDATE control.api_keys SET revoked_at = now() WHERE key_hash = $1", hash_key(tenant.key)
    )
    response = await client.get(TEAM, headers=tenant.headers)
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "invalid_api_key"


async def test_suspended_sub_account_key_is_401(client, tenant, pool):
    await pool.execute(
        "UPDATE control.sub_accounts SET status = 'suspended' WHERE id = $1", tenant.id
    )
    response = await client.get(TEAM, headers=tenant.headers)
    assert response.status_code == 401


async def test_x_api_key_wins_over_authorization(client, tenant):
    response = await client.get(
        TEAM, headers={"x-api-key": tenant.key, "authorization": "Bearer sb_wrong"}
    )
    assert response.status_code == 200


async def test_error_bodies_never_echo_the_key(client, tenant):
    response = await client.get(SUB_ACCOUNTS, headers=tenant.headers)
    assert tenant.key not in await response.get_data(as_text=True)
