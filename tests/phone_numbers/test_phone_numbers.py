"""Phone numbers: purchase, import, list, read, assign and release through the provider jobs."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import datetime, timedelta

import pytest

from tests.factories import assign, import_number, make_agent, priced_tenant
from tests.helpers import balance, expect_error, scope_of, tenant_sql

NUMBERS = "/webhooks/inbound/phone-numbers"
FAILING = "+12125550199"
UNASSIGN_FAILING = "+12125550198"


def parse_time(value):
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def number_rows(pool, tenant):
    return await tenant_sql(pool, tenant, "SELECT * FROM phone_numbers ORDER BY created_at")


async def purchase(client, tenant, **body):
    return await client.post(f"{NUMBERS}/purchase", json=body or None, headers=tenant.headers)


# --- purchase ---------------------------------------------------------------------------------


async def test_purchase_gives_a_sandbox_555_01xx_number(client, tenant, worker):
    response = await purchase(client, tenant)
    assert response.status_code == 201, await response.get_json()
    body = await response.get_json()
    number = body["phone_number"]
    assert body["status"] == "success"
    assert re.match(r"^\+1[2-9]\d\d55501\d\d$", number["phone_number"])
    assert not number["phone_number"].endswith("0199")
    assert number["purchased"] is True
    assert number["is_active"] is True
    assert number["agent_id"] is None and number["agent_name"] is None
    purchased_at = parse_time(number["purchased_at"])
    next_billing = parse_time(number["next_billing_date"])
    assert timedelta(days=28) <= next_billing - purchased_at <= timedelta(days=31)


async def test_purchase_in_area_code_uses_it(client, tenant, worker):
    response = await purchase(client, tenant, area_code="312")
    assert response.status_code == 201
    assert (await response.get_json())["phone_number"]["phone_number"].startswith("+1312555")


async def test_purchase_never_gives_a_number_twice_nor_0199(client, tenant, worker):
    seen = set()
    for _ in range(12):
        response = await purchase(client, tenant, area_code="617")
        assert response.status_code == 201
        seen.add((await response.get_json())["phone_number"]["phone_number"])
    assert len(seen) == 12
    assert not any(n.endswith(("0198", "0199")) for n in seen)


async def test_purchase_sells_every_other_number_of_an_area_code_but_never_0198_or_0199(
    client, tenant, worker
):
    seen = set()
    while True:
        response = await purchase(client, tenant, area_code="702")
        if response.status_code == 409:
            break
        seen.add((await response.get_json())["phone_number"]["phone_number"])
    assert seen == {f"+1702555{n:04d}" for n in range(100, 198)}


@pytest.mark.parametrize("area_code", ["12", "1234", "012", "abc", 415])
async def test_purchase_invalid_area_code_is_400(client, pool, tenant, area_code):
    response = await purchase(client, tenant, area_code=area_code)
    await expect_error(response, 400, "validation_error")
    assert await number_rows(pool, tenant) == []


async def test_purchase_charges_the_plans_monthly_price(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, credit=20, phone_number_monthly=7.5)
    response = await purchase(client, tenant)
    assert response.status_code == 201
    number_id = (await response.get_json())["phone_number"]["id"]
    assert await balance(pool, tenant) == 12.5
    ledger = await tenant_sql(
        pool,
        tenant,
        "SELECT amount, reference_type, reference_id FROM wallet_transactions WHERE amount < 0",
    )
    assert [(float(r["amount"]), r["reference_type"], str(r["reference_id"])) for r in ledger] == [
        (-7.5, "phone_number", number_id)
    ]


async def test_purchase_wallet_cannot_cover_is_402_and_nothing_bought(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, credit=5, phone_number_monthly=7.5)
    response = await purchase(client, tenant)
    await expect_error(response, 402, "insufficient_funds")
    assert await number_rows(pool, tenant) == []
    assert await balance(pool, tenant) == 5


async def test_purchase_without_a_price_is_free(client, pool, tenant, worker):
    assert (await purchase(client, tenant)).status_code == 201
    assert await balance(pool, tenant) == 0


async def test_purchase_without_worker_times_out_as_502_and_buys_nothing(
    client, pool, tenant, monkeypatch
):
    monkeypatch.setenv("SWITCHBOARD_TELEPHONY_TIMEOUT_SECONDS", "1")
    response = await purchase(client, tenant)
    await expect_error(response, 502, "provider_error")
    assert await number_rows(pool, tenant) == []


# --- import -----------------------------------------------------------------------------------


async def test_import_is_201_not_purchased_without_billing_dates(client, pool, tenant, worker):
    response = await client.post(
        f"{NUMBERS}/import", json={"phone_number": "+14155552671"}, headers=tenant.headers
    )
    assert response.status_code == 201
    number = (await response.get_json())["phone_number"]
    assert number["phone_number"] == "+14155552671"
    assert number["purchased"] is False
    assert number["purchased_at"] is None and number["next_billing_date"] is None
    assert number["is_active"] is True


@pytest.mark.parametrize(
    "value",
    [
        "4155552671",
        "+1415555267",
        "+1 415 555 2671",
        "+0123456",
        "",
        "+999999999999999",
        "+1415555267a",
    ],
)
async def test_import_not_e164_is_400(client, pool, tenant, value):
    response = await client.post(
        f"{NUMBERS}/import", json={"phone_number": value}, headers=tenant.headers
    )
    await expect_error(response, 400, "validation_error")
    assert await number_rows(pool, tenant) == []


@pytest.mark.parametrize("body", [{}, {"phone_number": 14155552671}, {"phone_number": None}])
async def test_import_missing_or_non_string_number_is_400(client, tenant, body):
    response = await client.post(f"{NUMBERS}/import", json=body, headers=tenant.headers)
    await expect_error(response, 400, "validation_error")


async def test_import_a_number_already_held_is_409(client, pool, tenant, worker):
    await import_number(client, tenant, "+14155552671")
    response = await client.post(
        f"{NUMBERS}/import", json={"phone_number": "+14155552671"}, headers=tenant.headers
    )
    await expect_error(response, 409, "phone_number_exists")
    assert len(await number_rows(pool, tenant)) == 1


async def test_import_0199_number_succeeds_in_the_sandbox(client, tenant, worker):
    await import_number(client, tenant, FAILING)


# --- list and read ----------------------------------------------------------------------------


async def test_list_is_active_numbers_ordered_by_number_with_agent_name(client, tenant, worker):
    agent_id = await make_agent(client, tenant, name="Receptionist")
    third = await import_number(client, tenant, "+14155550300")
    first = await import_number(client, tenant, "+14155550100")
    second = await import_number(client, tenant, "+14155550200")
    released = await import_number(client, tenant, "+14155550150")
    assert (await assign(client, tenant, second, agent_id)).status_code == 200
    assert (await client.delete(f"{NUMBERS}/{released}", headers=tenant.headers)).status_code == 200
    response = await client.get(NUMBERS, headers=tenant.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success"
    assert body["phone_number_count"] == 3
    assert [n["id"] for n in body["phone_numbers"]] == [first, second, third]
    by_id = {n["id"]: n for n in body["phone_numbers"]}
    assert by_id[second]["agent_id"] == agent_id
    assert by_id[second]["agent_name"] == "Receptionist"
    assert by_id[first]["agent_name"] is None


async def test_list_of_an_empty_sub_account(client, tenant):
    body = await (await client.get(NUMBERS, headers=tenant.headers)).get_json()
    assert body == {"status": "success", "phone_number_count": 0, "phone_numbers": []}


async def test_get_number_returns_it(client, tenant, worker):
    number_id = await import_number(client, tenant, "+14155552671")
    response = await client.get(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["phone_number"]["id"] == number_id
    assert set(body["phone_number"]) == {
        "id",
        "phone_number",
        "purchased",
        "agent_id",
        "agent_name",
        "is_active",
        "purchased_at",
        "next_billing_date",
    }


async def test_get_number_invalid_id_is_400(client, tenant):
    await expect_error(
        await client.get(f"{NUMBERS}/123", headers=tenant.headers), 400, "invalid_uuid"
    )


async def test_get_number_missing_is_404(client, tenant):
    await expect_error(
        await client.get(f"{NUMBERS}/{uuid.uuid4()}", headers=tenant.headers), 404, "not_found"
    )


async def test_numbers_of_another_sub_account_behave_as_missing(
    client, pool, tenant, tenant_second, worker
):
    other = await import_number(client, tenant_second, "+14155552671")
    other_agent = await make_agent(client, tenant_second)
    mine = await make_agent(client, tenant)
    await expect_error(
        await client.get(f"{NUMBERS}/{other}", headers=tenant.headers), 404, "not_found"
    )
    await expect_error(await assign(client, tenant, other, mine), 404, "not_found")
    await expect_error(
        await client.delete(f"{NUMBERS}/{other}", headers=tenant.headers), 404, "not_found"
    )
    listed = await (await client.get(NUMBERS, headers=tenant.headers)).get_json()
    assert listed["phone_numbers"] == []
    own = await import_number(client, tenant, "+14155550123")
    await expect_error(await assign(client, tenant, own, other_agent), 404, "not_found")
    rows = await number_rows(pool, tenant_second)
    assert rows[0]["is_active"] and rows[0]["agent_id"] is None


# --- assign -----------------------------------------------------------------------------------


async def test_assign_is_200_and_repeating_it_is_already_assigned(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155552671")
    response = await assign(client, tenant, number_id, agent_id)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "assigned": True,
        "phone_number_id": number_id,
        "phone_number": "+14155552671",
        "agent_id": agent_id,
        "already_assigned": False,
    }
    again = await assign(client, tenant, number_id, agent_id)
    assert again.status_code == 200
    assert (await again.get_json())["already_assigned"] is True
    row = (await number_rows(pool, tenant))[0]
    assert str(row["agent_id"]) == agent_id and row["dispatch_rule_id"]


async def test_assign_to_another_agent_is_409(client, pool, tenant, worker):
    first = await make_agent(client, tenant)
    second = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155552671")
    assert (await assign(client, tenant, number_id, first)).status_code == 200
    await expect_error(
        await assign(client, tenant, number_id, second), 409, "phone_number_assigned_elsewhere"
    )
    assert str((await number_rows(pool, tenant))[0]["agent_id"]) == first


async def test_assign_invalid_uuids_are_400(client, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155552671")
    await expect_error(await assign(client, tenant, "nope", agent_id), 400, "invalid_uuid")
    await expect_error(await assign(client, tenant, number_id, "nope"), 400, "invalid_uuid")
    response = await client.post(f"{NUMBERS}/{number_id}/agent", json={}, headers=tenant.headers)
    await expect_error(response, 400, "validation_error")


async def test_assign_missing_number_or_agent_is_404(client, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155552671")
    await expect_error(await assign(client, tenant, str(uuid.uuid4()), agent_id), 404, "not_found")
    await expect_error(await assign(client, tenant, number_id, str(uuid.uuid4())), 404, "not_found")


async def test_assign_when_provisioning_fails_is_502_and_nothing_changes(
    client, pool, tenant, worker
):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, FAILING)
    await expect_error(await assign(client, tenant, number_id, agent_id), 502, "provider_error")
    row = (await number_rows(pool, tenant))[0]
    assert row["agent_id"] is None and row["dispatch_rule_id"] is None
    number = (
        await (await client.get(f"{NUMBERS}/{number_id}", headers=tenant.headers)).get_json()
    )["phone_number"]
    assert number["agent_id"] is None


async def test_assign_without_worker_times_out_as_502_and_changes_nothing(
    client, pool, tenant, worker, monkeypatch
):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155552671")
    worker.allow_pick_jobs = False
    monkeypatch.setenv("SWITCHBOARD_TELEPHONY_TIMEOUT_SECONDS", "1")
    await expect_error(await assign(client, tenant, number_id, agent_id), 502, "provider_error")
    assert (await number_rows(pool, tenant))[0]["agent_id"] is None


# --- unassign ---------------------------------------------------------------------------------


async def unassign(client, tenant, number_id):
    return await client.delete(f"{NUMBERS}/{number_id}/agent", headers=tenant.headers)


async def assigned_number(client, tenant, phone_number="+14155552671"):
    """(number id, agent id) of an imported number assigned to a new agent."""
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, phone_number)
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    return number_id, agent_id


async def test_unassign_takes_the_number_from_its_agent(client, pool, tenant, worker):
    number_id, agent_id = await assigned_number(client, tenant)
    response = await unassign(client, tenant, number_id)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "unassigned": True,
        "already_unassigned": False,
        "phone_number_id": number_id,
        "phone_number": "+14155552671",
        "agent_id": agent_id,
        "dispatch_rule_deleted": True,
    }
    row = (await number_rows(pool, tenant))[0]
    assert row["agent_id"] is None and row["dispatch_rule_id"] is None
    assert row["assigned_at"] is None and row["is_active"]
    shown = (await (await client.get(f"{NUMBERS}/{number_id}", headers=tenant.headers)).get_json())[
        "phone_number"
    ]
    assert shown["agent_id"] is None and shown["agent_name"] is None
    # The agent may have it back, and another agent may take it now.
    other = await make_agent(client, tenant)
    assert (await (await assign(client, tenant, number_id, other)).get_json())[
        "already_assigned"
    ] is False


async def test_unassign_repeated_is_200_already_unassigned(client, tenant, worker):
    number_id, agent_id = await assigned_number(client, tenant)
    assert (await unassign(client, tenant, number_id)).status_code == 200
    again = await unassign(client, tenant, number_id)
    assert again.status_code == 200
    assert await again.get_json() == {
        "status": "success",
        "unassigned": True,
        "already_unassigned": True,
        "phone_number_id": number_id,
        "phone_number": "+14155552671",
        "agent_id": None,
        "dispatch_rule_deleted": False,
    }


async def test_unassign_a_number_never_assigned_needs_no_worker(client, pool, tenant, worker):
    number_id = await import_number(client, tenant, "+14155552671")
    worker.allow_pick_jobs = False
    response = await unassign(client, tenant, number_id)
    assert (await response.get_json())["already_unassigned"] is True


async def test_unassign_when_the_provider_fails_is_502_and_the_assignment_stays(
    client, pool, tenant, worker
):
    number_id, agent_id = await assigned_number(client, tenant, UNASSIGN_FAILING)
    before = (await number_rows(pool, tenant))[0]
    await expect_error(await unassign(client, tenant, number_id), 502, "provider_error")
    after = (await number_rows(pool, tenant))[0]
    assert str(after["agent_id"]) == agent_id
    assert (after["dispatch_rule_id"], after["assigned_at"], after["updated_at"]) == (
        before["dispatch_rule_id"],
        before["assigned_at"],
        before["updated_at"],
    )
    shown = (await (await client.get(f"{NUMBERS}/{number_id}", headers=tenant.headers)).get_json())[
        "phone_number"
    ]
    assert shown["agent_id"] == agent_id


async def test_unassign_without_worker_times_out_as_502_and_changes_nothing(
    client, pool, tenant, worker, monkeypatch
):
    number_id, agent_id = await assigned_number(client, tenant)
    worker.allow_pick_jobs = False
    monkeypatch.setenv("SWITCHBOARD_TELEPHONY_TIMEOUT_SECONDS", "1")
    await expect_error(await unassign(client, tenant, number_id), 502, "provider_error")
    assert str((await number_rows(pool, tenant))[0]["agent_id"]) == agent_id


async def test_unassign_invalid_id_is_400_and_missing_or_released_is_404(client, tenant, worker):
    await expect_error(await unassign(client, tenant, "x"), 400, "invalid_uuid")
    await expect_error(await unassign(client, tenant, uuid.uuid4()), 404, "not_found")
    number_id = await import_number(client, tenant, "+14155552671")
    assert (
        await client.delete(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    ).status_code == 200
    await expect_error(await unassign(client, tenant, number_id), 404, "not_found")


async def test_unassign_another_sub_accounts_number_is_404_and_leaves_it_assigned(
    client, pool, tenant, tenant_second, worker
):
    theirs, agent_id = await assigned_number(client, tenant_second)
    await expect_error(await unassign(client, tenant, theirs), 404, "not_found")
    assert str((await number_rows(pool, tenant_second))[0]["agent_id"]) == agent_id


# --- release ----------------------------------------------------------------------------------


async def test_release_purchased_number(client, pool, tenant, worker):
    agent_id = await make_agent(client, tenant)
    bought = (await (await purchase(client, tenant)).get_json())["phone_number"]
    assert (await assign(client, tenant, bought["id"], agent_id)).status_code == 200
    response = await client.delete(f"{NUMBERS}/{bought['id']}", headers=tenant.headers)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "released": True,
        "phone_number_id": bought["id"],
        "phone_number": bought["phone_number"],
        "was_purchased": True,
        "dispatch_rule_deleted": True,
    }
    row = (await number_rows(pool, tenant))[0]
    assert row["is_active"] is False and row["agent_id"] is None
    assert row["next_billing_date"] is None and row["released_at"] is not None
    await expect_error(
        await client.get(f"{NUMBERS}/{bought['id']}", headers=tenant.headers), 404, "not_found"
    )


async def test_release_imported_unassigned_number(client, tenant, worker):
    number_id = await import_number(client, tenant, "+14155552671")
    response = await client.delete(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["was_purchased"] is False and body["dispatch_rule_deleted"] is False


async def test_release_takes_the_number_from_its_agent_at_once(client, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155552671")
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    response = await client.delete(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    assert (await response.get_json())["dispatch_rule_deleted"] is True
    # The number can be imported again and assigned afresh.
    again = await import_number(client, tenant, "+14155552671")
    assert again != number_id
    assert (await (await assign(client, tenant, again, agent_id)).get_json())[
        "already_assigned"
    ] is False


async def test_release_when_provider_fails_is_502_and_the_number_is_kept(
    client, pool, tenant, worker
):
    number_id = await import_number(client, tenant, FAILING)
    response = await client.delete(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    await expect_error(response, 502, "provider_error")
    row = (await number_rows(pool, tenant))[0]
    assert row["is_active"] is True and row["released_at"] is None
    listed = await (await client.get(NUMBERS, headers=tenant.headers)).get_json()
    assert [n["id"] for n in listed["phone_numbers"]] == [number_id]


async def test_release_invalid_id_is_400_and_missing_is_404(client, tenant):
    await expect_error(
        await client.delete(f"{NUMBERS}/x", headers=tenant.headers), 400, "invalid_uuid"
    )
    await expect_error(
        await client.delete(f"{NUMBERS}/{uuid.uuid4()}", headers=tenant.headers), 404, "not_found"
    )


async def test_release_twice_is_404(client, tenant, worker):
    number_id = await import_number(client, tenant, "+14155552671")
    assert (
        await client.delete(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    ).status_code == 200
    await expect_error(
        await client.delete(f"{NUMBERS}/{number_id}", headers=tenant.headers), 404, "not_found"
    )


async def test_phone_number_routes_need_a_sub_account_key(client, tenant):
    assert (await client.get(NUMBERS)).status_code == 401
    response = await client.get(NUMBERS, headers=tenant.organisation.headers)
    assert response.status_code == 401


# --- monthly renewal --------------------------------------------------------------------------


async def bill_now(pool, tenant, number_id):
    """Make the number's next month due now (as if a month had passed)."""
    from tenancy.clock import utcnow
    from tenancy.db import tenant_transaction
    from tenancy.due import schedule_due

    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE phone_numbers SET next_billing_date = now() - interval "
            "'1 second' WHERE id = $1",
            uuid.UUID(number_id),
        )
        await schedule_due(conn, tenant.id, "phone_number_renewal", uuid.UUID(number_id), utcnow())


async def ledger(pool, tenant):
    return await tenant_sql(
        pool,
        tenant,
        "SELECT amount, status, description FROM "
        "wallet_transactions WHERE amount < 0 ORDER BY created_at",
    )


async def wait_until(check):
    for _ in range(600):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the worker never got there")


async def test_purchased_number_renews_monthly_at_the_plans_price(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, credit=20, phone_number_monthly=7.5)
    number_id = (await (await purchase(client, tenant)).get_json())["phone_number"]["id"]
    await bill_now(pool, tenant, number_id)

    async def renewed():
        return await balance(pool, tenant) == 5

    await wait_until(renewed)
    number = (
        await (await client.get(f"{NUMBERS}/{number_id}", headers=tenant.headers)).get_json()
    )["phone_number"]
    assert parse_time(number["next_billing_date"]) > datetime.now(
        parse_time(number["purchased_at"]).tzinfo
    ) + timedelta(days=20)


async def test_renewal_the_wallet_cannot_cover_is_declined_and_the_number_kept(
    client, pool, agency, worker
):
    tenant = await priced_tenant(client, agency, credit=10, phone_number_monthly=7.5)
    number_id = (await (await purchase(client, tenant)).get_json())["phone_number"]["id"]
    await bill_now(pool, tenant, number_id)

    async def declined():
        return any(r["status"] == "declined" for r in await ledger(pool, tenant))

    await wait_until(declined)
    assert await balance(pool, tenant) == 2.5
    response = await client.get(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    assert (await response.get_json())["phone_number"]["is_active"] is True


async def test_released_number_is_not_renewed(client, pool, agency, worker):
    tenant = await priced_tenant(client, agency, credit=20, phone_number_monthly=7.5)
    number_id = (await (await purchase(client, tenant)).get_json())["phone_number"]["id"]
    assert (
        await client.delete(f"{NUMBERS}/{number_id}", headers=tenant.headers)
    ).status_code == 200
    due = await pool.fetchval(
        "SELECT count(*) FROM control.due_work WHERE ref_id = $1", uuid.UUID(number_id)
    )
    assert due == 0
    assert await balance(pool, tenant) == 12.5


# --- the platform-wide directory (CONTRACT 9) -------------------------------------------------


async def directory(pool, phone_number):
    return await pool.fetchrow(
        "SELECT sub_account_id, phone_number_id FROM control.phone_number_directory "
        "WHERE phone_number = $1",
        phone_number,
    )


async def test_import_of_a_number_another_sub_account_holds_is_409(
    client, pool, tenant, tenant_second, worker
):
    held = await import_number(client, tenant_second, "+14155550161")
    response = await client.post(
        f"{NUMBERS}/import", json={"phone_number": "+14155550161"}, headers=tenant.headers
    )
    await expect_error(response, 409, "phone_number_exists")
    assert await number_rows(pool, tenant) == []
    entry = await directory(pool, "+14155550161")
    assert (str(entry["sub_account_id"]), str(entry["phone_number_id"])) == (
        str(tenant_second.id),
        held,
    )


async def test_a_released_number_is_free_for_another_sub_account(
    client, pool, tenant, tenant_second, worker
):
    held = await import_number(client, tenant_second, "+14155550162")
    response = await client.delete(f"{NUMBERS}/{held}", headers=tenant_second.headers)
    assert response.status_code == 200
    assert await directory(pool, "+14155550162") is None
    mine = await import_number(client, tenant, "+14155550162")
    entry = await directory(pool, "+14155550162")
    assert (str(entry["sub_account_id"]), str(entry["phone_number_id"])) == (str(tenant.id), mine)


async def test_concurrent_imports_of_one_number_leave_one_holder(
    client, pool, tenant, tenant_second, worker
):
    responses = await asyncio.gather(
        *(
            client.post(
                f"{NUMBERS}/import", json={"phone_number": "+14155550163"}, headers=who.headers
            )
            for who in (tenant, tenant_second)
        )
    )
    assert sorted(r.status_code for r in responses) == [201, 409]
    rows = await number_rows(pool, tenant) + await number_rows(pool, tenant_second)
    assert len(rows) == 1


async def test_a_purchased_number_is_entered_in_the_directory(client, pool, tenant, worker):
    number = (await (await purchase(client, tenant)).get_json())["phone_number"]
    entry = await directory(pool, number["phone_number"])
    assert (str(entry["sub_account_id"]), str(entry["phone_number_id"])) == (
        str(tenant.id),
        number["id"],
    )


async def test_a_purchase_that_meets_a_number_held_elsewhere_buys_another_and_keeps_it_there(
    client, pool, tenant, tenant_second, worker, monkeypatch
):
    import time

    from api.phone_numbers.service import provision_purchase
    from integrations.telephony import Providers
    from tests.integrations.fake_twilio import FakeTwilio, twilio_app
    from tests.receiver import serving

    held = await import_number(client, tenant_second, "+14155550175")
    carrier = FakeTwilio(available={"415": ["+14155550175", "+14155550176"]})
    async with serving(twilio_app(carrier)) as base:
        for name, value in {
            "TWILIO_ACCOUNT_SID": carrier.account_sid,
            "TWILIO_AUTH_TOKEN": carrier.auth_token,
            "TWILIO_VOICE_URL": "https://voice.example.com/voice/twilio/twiml",
            "TWILIO_API_BASE_URL": base,
        }.items():
            monkeypatch.setenv(name, value)
        providers = Providers("twilio")
        try:
            outcome = await provision_purchase(
                scope_of(pool, tenant), providers, "415", time.time() + 30
            )
        finally:
            await providers.aclose()
    [mine] = await number_rows(pool, tenant)
    assert (str(mine["id"]), mine["phone_number"]) == (outcome["phone_number_id"], "+14155550176")
    entry = await directory(pool, "+14155550175")
    assert (entry["sub_account_id"], str(entry["phone_number_id"])) == (tenant_second.id, held)
    assert not [r for r in carrier.requests if r[0] == "DELETE"]
