"""Sandbox inbound calls with a `call_sid` (CONTRACT 11, 11a): a replayed webhook rings once.

A repeat of a call_sid answers 202 with the first call's ids, whatever its from and to, and
writes nothing; concurrent repeats make one call; the call_sid is remembered 24 h and per
sub-account. The callers here are the sandbox's busy number, so each call ends at once.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from api.calls.inbound import CALL_SID_MEMORY, sid_call_ids
from tests.factories import assign, import_number, make_agent
from tests.helpers import expect_error, snapshot, tenant_sql

from .test_calls import wait_for_end
from .test_inbound_calls import BUSY_CALLER, NUMBER, answering_agent, ring

CALLS = "/webhooks/inbound/calls"
# Another busy caller (the last four digits choose the sandbox script).
OTHER_BUSY_CALLER = "+14155551187"
SECOND_NUMBER = "+14155550124"


def sid() -> str:
    return f"CA{uuid.uuid4().hex}"


async def ring_ok(client, sub_account_id, body) -> dict:
    response = await ring(client, sub_account_id, body)
    assert response.status_code == 202, await response.get_data(as_text=True)
    body = await response.get_json()
    assert set(body) == {"status", "call_id", "contact_id"}
    return body


async def listed_calls(client, tenant) -> list[dict]:
    response = await client.get(CALLS, headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    assert body["total"] == len(body["calls"])
    return body["calls"]


async def test_a_repeated_call_sid_rings_once_and_answers_the_first_call(
    client, pool, tenant, worker
):
    await answering_agent(client, tenant)
    call_sid = sid()
    first = await ring_ok(
        client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER, "call_sid": call_sid}
    )

    # At once (the call still queued), and whatever its from and to: a number the sub-account
    # does not hold, a caller it has never seen.
    again = await ring_ok(
        client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER, "call_sid": call_sid}
    )
    other_numbers = await ring_ok(
        client, tenant.id, {"from": OTHER_BUSY_CALLER, "to": "+14155550999", "call_sid": call_sid}
    )
    assert again == other_numbers == first

    call = await wait_for_end(client, tenant, first["call_id"])
    assert call["status"] == "failed" and call["direction"] == "inbound"
    # Ended, it is still the call of its call_sid; the repeat writes nothing.
    before = await snapshot(pool, tenant)
    assert (
        await ring_ok(client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER, "call_sid": call_sid})
        == first
    )
    assert await snapshot(pool, tenant) == before

    [listed] = await listed_calls(client, tenant)
    assert (listed["id"], listed["contact_id"]) == (first["call_id"], first["contact_id"])
    contacts = await tenant_sql(pool, tenant, "SELECT phone FROM contacts")
    assert [row["phone"] for row in contacts] == [BUSY_CALLER]


async def test_concurrent_repeats_make_one_call(client, pool, tenant, worker):
    await answering_agent(client, tenant)
    body = {"from": BUSY_CALLER, "to": NUMBER, "call_sid": sid()}

    responses = await asyncio.gather(*(ring(client, tenant.id, body) for _ in range(10)))

    answers = []
    for response in responses:
        assert response.status_code == 202, await response.get_data(as_text=True)
        answers.append(await response.get_json())
    assert all(answer == answers[0] for answer in answers), answers
    [listed] = await listed_calls(client, tenant)
    assert listed["id"] == answers[0]["call_id"]
    assert len(await tenant_sql(pool, tenant, "SELECT id FROM contacts")) == 1
    await wait_for_end(client, tenant, answers[0]["call_id"])


async def test_the_same_call_sid_in_another_sub_account_is_another_call(
    client, pool, tenant, tenant_second, worker
):
    await answering_agent(client, tenant)
    await answering_agent(client, tenant_second, SECOND_NUMBER)
    call_sid = sid()

    mine = await ring_ok(
        client, tenant.id, {"from": BUSY_CALLER, "to": NUMBER, "call_sid": call_sid}
    )
    theirs = await ring_ok(
        client, tenant_second.id, {"from": BUSY_CALLER, "to": SECOND_NUMBER, "call_sid": call_sid}
    )

    assert mine["call_id"] != theirs["call_id"]
    assert [call["id"] for call in await listed_calls(client, tenant)] == [mine["call_id"]]
    assert [call["id"] for call in await listed_calls(client, tenant_second)] == [theirs["call_id"]]
    # Each sub-account's repeat still finds its own.
    assert (
        await ring_ok(
            client,
            tenant_second.id,
            {"from": BUSY_CALLER, "to": SECOND_NUMBER, "call_sid": call_sid},
        )
        == theirs
    )
    for owner, answer in ((tenant, mine), (tenant_second, theirs)):
        await wait_for_end(client, owner, answer["call_id"])


async def test_a_call_sid_older_than_a_day_rings_again(client, pool, tenant, worker):
    await answering_agent(client, tenant)
    body = {"from": BUSY_CALLER, "to": NUMBER, "call_sid": sid()}
    first = await ring_ok(client, tenant.id, body)
    await wait_for_end(client, tenant, first["call_id"])

    # Just inside the day it is still the same call.
    await tenant_sql(
        pool,
        tenant,
        "UPDATE calls SET created_at = now() - $2::interval + interval '1 minute' WHERE id = $1",
        uuid.UUID(first["call_id"]),
        CALL_SID_MEMORY,
    )
    assert await ring_ok(client, tenant.id, body) == first

    await tenant_sql(
        pool,
        tenant,
        "UPDATE calls SET created_at = now() - $2::interval - interval '1 second' WHERE id = $1",
        uuid.UUID(first["call_id"]),
        CALL_SID_MEMORY,
    )
    second = await ring_ok(client, tenant.id, body)
    assert second["call_id"] != first["call_id"]
    assert second["contact_id"] == first["contact_id"]
    # The new ring is the one remembered now.
    assert await ring_ok(client, tenant.id, body) == second
    assert sorted(call["id"] for call in await listed_calls(client, tenant)) == sorted(
        [first["call_id"], second["call_id"]]
    )
    await wait_for_end(client, tenant, second["call_id"])


async def test_a_ring_that_was_refused_is_not_remembered(client, pool, tenant, worker):
    number_id = await import_number(client, tenant, NUMBER)
    body = {"from": BUSY_CALLER, "to": NUMBER, "call_sid": sid()}
    await expect_error(await ring(client, tenant.id, body), 409, "phone_number_unassigned")

    agent_id = await make_agent(client, tenant)
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200

    answer = await ring_ok(client, tenant.id, body)
    assert [call["id"] for call in await listed_calls(client, tenant)] == [answer["call_id"]]
    await wait_for_end(client, tenant, answer["call_id"])


async def test_without_a_call_sid_every_ring_is_a_call(client, pool, tenant, worker):
    await answering_agent(client, tenant)
    body = {"from": BUSY_CALLER, "to": NUMBER}
    first = await ring_ok(client, tenant.id, body)
    second = await ring_ok(client, tenant.id, {**body, "call_sid": None})
    assert first["call_id"] != second["call_id"]
    assert len(await listed_calls(client, tenant)) == 2
    for answer in (first, second):
        await wait_for_end(client, tenant, answer["call_id"])


@pytest.mark.parametrize(
    "call_sid",
    [
        "",
        "x" * 65,
        "CA 123",
        "CA/123",
        "CA.123",
        "CA\n",
        "CA\u00e9",
        "\u0661\u0662",
        123,
        True,
        ["CA1"],
        {"sid": "CA1"},
    ],
)
async def test_a_bad_call_sid_is_400_and_rings_nothing(client, pool, tenant, call_sid):
    before = await snapshot(pool, tenant)
    raw = {"from": BUSY_CALLER, "to": NUMBER, "call_sid": call_sid}
    answer = await expect_error(await ring(client, tenant.id, raw), 400, "validation_error")
    assert [detail["field"] for detail in answer["error"]["details"]] == ["call_sid"], answer
    assert await snapshot(pool, tenant) == before


@pytest.mark.parametrize("call_sid", ["a", "x" * 64, "CA_0123-abc", "-", "_"])
def test_call_sids_of_one_to_64_letters_digits_dashes_and_underscores_are_taken(call_sid):
    from api.calls.schemas import SandboxInboundCall

    body = json.dumps({"from": BUSY_CALLER, "to": NUMBER, "call_sid": call_sid})
    assert SandboxInboundCall.model_validate_json(body).call_sid == call_sid


def test_call_ids_of_a_call_sid_are_its_own_per_sub_account_and_generation():
    one, two = uuid.uuid4(), uuid.uuid4()
    ids = sid_call_ids(one, "CA1")
    first, second = next(ids), next(ids)
    assert first != second and first.version == 5
    assert next(sid_call_ids(one, "CA1")) == first
    assert next(sid_call_ids(two, "CA1")) != first
    assert next(sid_call_ids(one, "CA2")) != first
