"""Call campaigns through the API (CONTRACT 10): create with their own fields, every bound a 400
naming the field with nothing changed, another sub-account's agent, pool or list 404, and the
recipients' list of every campaign type."""

from __future__ import annotations

import pytest

from tests.campaigns.call_campaigns import (
    CAMPAIGNS,
    call_body,
    callees,
    create_call_campaign,
    recipients_of,
)
from tests.factories import create_campaign, import_number, make_agent, unique_phone
from tests.helpers import error_of, snapshot


async def test_call_campaign_is_created_with_its_fields_and_defaults(client, tenant):
    agent_id = await make_agent(client, tenant)
    contacts = await callees(client, tenant, 2)
    campaign = await create_call_campaign(client, tenant, agent_id, contacts)
    assert campaign["campaign_type"] == "call" and campaign["status"] == "draft"
    assert campaign["agent_id"] == agent_id and campaign["pool_id"] is None
    assert campaign["variables"] == {} and campaign["calling_window"] is None
    assert campaign["max_concurrent_calls"] == 5
    assert campaign["retry"] == {
        "max_attempts": 1,
        "delay_minutes": 60,
        "on": ["no_answer", "busy"],
    }
    assert campaign["subject"] is None and campaign["message_content"] is None
    assert (campaign["pending"], campaign["contacted"], campaign["success"]) == (2, 0, 0)


async def test_call_campaign_get_shows_window_retry_variables_and_pool(client, tenant, worker):
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, unique_phone())
    response = await client.post(
        "/webhooks/inbound/number-pools",
        json={"name": "Pool", "phone_number_ids": [number_id]},
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    pool_id = (await response.get_json())["pool"]["id"]
    window = {
        "timezone": "Europe/Berlin",
        "days": ["fri", "mon", "mon"],
        "start": "09:00",
        "end": "17:30",
    }
    created = await create_call_campaign(
        client,
        tenant,
        agent_id,
        await callees(client, tenant, 1),
        pool_id=pool_id,
        variables={"offer": "20% off", "city": "Berlin"},
        calling_window=window,
        max_concurrent_calls=50,
        retry={"max_attempts": 3, "delay_minutes": 30, "on": ["voicemail", "no_answer"]},
    )
    response = await client.get(f"{CAMPAIGNS}/{created['id']}", headers=tenant.headers)
    campaign = (await response.get_json())["campaign"]
    assert campaign["pool_id"] == pool_id
    assert campaign["variables"] == {"offer": "20% off", "city": "Berlin"}
    assert campaign["calling_window"] == {
        "timezone": "Europe/Berlin",
        "days": ["mon", "fri"],
        "start": "09:00",
        "end": "17:30",
    }
    assert campaign["max_concurrent_calls"] == 50
    assert campaign["retry"] == {
        "max_attempts": 3,
        "delay_minutes": 30,
        "on": ["voicemail", "no_answer"],
    }


async def test_email_campaign_shows_null_call_fields(client, tenant):
    campaign = await create_campaign(client, tenant)
    for field in (
        "agent_id",
        "pool_id",
        "variables",
        "calling_window",
        "max_concurrent_calls",
        "retry",
    ):
        assert campaign[field] is None, field


WINDOW = {"timezone": "UTC", "days": ["mon"], "start": "09:00", "end": "17:00"}

# (what is wrong, the field the 400 names, the body's changes)
BAD_CALL_BODIES = [
    ("subject on a call campaign", "subject", {"subject": "Hello"}),
    ("message content on a call campaign", "message_content", {"message_content": "Hi"}),
    (
        "business hours on a call campaign",
        "business_hours_enabled",
        {"business_hours_enabled": True},
    ),
    (
        "business hours config on a call campaign",
        "business_hours_config",
        {"business_hours_config": WINDOW},
    ),
    ("no agent", "agent_id", {"agent_id": None}),
    ("max_concurrent_calls 0", "max_concurrent_calls", {"max_concurrent_calls": 0}),
    ("max_concurrent_calls 101", "max_concurrent_calls", {"max_concurrent_calls": 101}),
    ("max_concurrent_calls as text", "max_concurrent_calls", {"max_concurrent_calls": "5"}),
    ("max_attempts 0", "retry.max_attempts", {"retry": {"max_attempts": 0}}),
    ("max_attempts 6", "retry.max_attempts", {"retry": {"max_attempts": 6}}),
    ("delay_minutes 0", "retry.delay_minutes", {"retry": {"delay_minutes": 0}}),
    ("delay_minutes 1441", "retry.delay_minutes", {"retry": {"delay_minutes": 1441}}),
    ("an unknown outcome", "retry.on", {"retry": {"on": ["hangup"]}}),
    ("an unknown retry field", "retry.delay", {"retry": {"delay": 5}}),
    ("a variable name with capitals", "variables", {"variables": {"Name": "x"}}),
    ("a variable value too long", "variables", {"variables": {"offer": "x" * 1001}}),
    ("a variable that is not text", "variables", {"variables": {"offer": 5}}),
    ("51 variables", "variables", {"variables": {f"v{n}": "x" for n in range(51)}}),
    (
        "an unknown timezone",
        "calling_window.timezone",
        {"calling_window": {**WINDOW, "timezone": "Mars/Olympus"}},
    ),
    ("an unknown day", "calling_window.days", {"calling_window": {**WINDOW, "days": ["monday"]}}),
    ("no days", "calling_window.days", {"calling_window": {**WINDOW, "days": []}}),
    (
        "a start after the end",
        "calling_window.end",
        {"calling_window": {**WINDOW, "start": "18:00"}},
    ),
    ("a malformed start", "calling_window.start", {"calling_window": {**WINDOW, "start": "9:00"}}),
    ("24:00 as the end", "calling_window.end", {"calling_window": {**WINDOW, "end": "24:00"}}),
    (
        "a window without its end",
        "calling_window.end",
        {"calling_window": {"timezone": "UTC", "days": ["mon"], "start": "09:00"}},
    ),
    ("a window that is not an object", "calling_window", {"calling_window": "9-5"}),
]


@pytest.mark.parametrize(
    ("field", "changes"),
    [pytest.param(field, changes, id=why) for why, field, changes in BAD_CALL_BODIES],
)
async def test_bad_call_campaign_is_400_naming_the_field_and_changes_nothing(
    client, pool, tenant, field, changes
):
    agent_id = await make_agent(client, tenant)
    contacts = await callees(client, tenant, 1)
    body = {**call_body(agent_id, contacts), **changes}
    before = await snapshot(pool, tenant)
    response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
    error = await error_of(response, 400)
    assert error["code"] == "validation_error", error
    assert any(detail["field"].startswith(field) for detail in error["details"]), error
    assert await snapshot(pool, tenant) == before


@pytest.mark.parametrize(
    "changes",
    [
        {"max_concurrent_calls": 5},
        {"retry": {"max_attempts": 2}},
        {"calling_window": WINDOW},
        {"variables": {"offer": "x"}},
        {"agent_id": "00000000-0000-4000-8000-000000000000"},
    ],
    ids=lambda changes: next(iter(changes)),
)
async def test_call_fields_on_an_email_campaign_are_400(client, pool, tenant, changes):
    before = await snapshot(pool, tenant)
    body = {
        "name": "News",
        "campaign_type": "email",
        "subject": "News",
        "message_content": "<p>Hi</p>",
        **changes,
    }
    response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
    error = await error_of(response, 400)
    assert error["details"][0]["field"] == next(iter(changes))
    assert await snapshot(pool, tenant) == before


async def test_bounds_at_their_limits_are_accepted(client, tenant):
    agent_id = await make_agent(client, tenant)
    contacts = await callees(client, tenant, 1)
    for concurrency, attempts, delay in ((1, 1, 1), (100, 5, 1440)):
        campaign = await create_call_campaign(
            client,
            tenant,
            agent_id,
            contacts,
            max_concurrent_calls=concurrency,
            retry={"max_attempts": attempts, "delay_minutes": delay, "on": ["failed"]},
            variables={f"v{n}": "x" * 1000 for n in range(50)},
        )
        assert campaign["max_concurrent_calls"] == concurrency
        assert campaign["retry"]["max_attempts"] == attempts


async def test_unknown_agent_is_404(client, pool, tenant):
    contacts = await callees(client, tenant, 1)
    before = await snapshot(pool, tenant)
    body = call_body("00000000-0000-4000-8000-000000000000", contacts)
    response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
    assert (await error_of(response, 404))["code"] == "not_found"
    assert await snapshot(pool, tenant) == before


async def test_another_sub_accounts_agent_pool_or_list_is_404(
    client, pool, tenant, tenant_second, worker
):
    own_agent = await make_agent(client, tenant)
    contacts = await callees(client, tenant, 1)
    their_agent = await make_agent(client, tenant_second)
    their_number = await import_number(client, tenant_second, unique_phone())
    response = await client.post(
        "/webhooks/inbound/number-pools",
        json={"name": "Theirs", "phone_number_ids": [their_number]},
        headers=tenant_second.headers,
    )
    their_pool = (await response.get_json())["pool"]["id"]
    response = await client.post(
        "/webhooks/inbound/smart-lists",
        json={"name": "Theirs", "tags": ["vip"]},
        headers=tenant_second.headers,
    )
    their_list = (await response.get_json())["smart_list"]["id"]
    before = await snapshot(pool, tenant)
    for body in (
        call_body(their_agent, contacts),
        call_body(own_agent, contacts, pool_id=their_pool),
        {**call_body(own_agent, []), "contact_ids": None, "smart_list_id": their_list},
    ):
        response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
        assert (await error_of(response, 404))["code"] == "not_found"
    assert await snapshot(pool, tenant) == before


async def test_recipients_of_another_sub_accounts_campaign_is_404(client, tenant, tenant_second):
    theirs = await create_campaign(client, tenant_second)
    response = await client.get(f"{CAMPAIGNS}/{theirs['id']}/recipients", headers=tenant.headers)
    assert (await error_of(response, 404))["code"] == "not_found"


async def test_recipients_of_a_draft_are_an_empty_page(client, tenant):
    agent_id = await make_agent(client, tenant)
    campaign = await create_call_campaign(
        client, tenant, agent_id, await callees(client, tenant, 2)
    )
    response = await client.get(f"{CAMPAIGNS}/{campaign['id']}/recipients", headers=tenant.headers)
    body = await response.get_json()
    assert body["recipients"] == [] and body["total"] == 0


async def test_recipients_paginate_as_every_list(client, tenant):
    agent_id = await make_agent(client, tenant)
    campaign = await create_call_campaign(
        client, tenant, agent_id, await callees(client, tenant, 1)
    )
    response = await client.get(
        f"{CAMPAIGNS}/{campaign['id']}/recipients?limit=0", headers=tenant.headers
    )
    assert (await error_of(response, 400))["code"] == "validation_error"
    assert await recipients_of(client, tenant, campaign["id"]) == []
