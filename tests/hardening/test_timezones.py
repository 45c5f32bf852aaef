"""Timezones are IANA names only (CONTRACT 10, 18a): every field that takes one refuses the files
of the tz database that are no zone (`localtime`, `posixrules`, `Factory`), paths and the rest
with 400 validation_error naming the field, and stores nothing; real zone names still pass."""

from __future__ import annotations

from typing import Any

import pytest

from api import timezones
from tests.campaigns.call_campaigns import CAMPAIGNS, call_body, callees
from tests.factories import (
    CALENDARS,
    agent_body,
    connect,
    create_calendar,
    make_agent,
)
from tests.helpers import expect_error, tenant_sql

AGENTS = "/webhooks/inbound/agents"
CREATE_AGENT = "/functions/v1/crm-api/create-agent"
HOURS = {"days": ["mon", "tue"], "start": "09:00", "end": "17:00"}
WINDOW = [{"day": "mon", "start": "09:00", "end": "17:00"}]

NOT_ZONES = [
    "localtime",
    "posixrules",
    "Factory",
    "Etc/Unknown",
    "../etc",
    "/etc/localtime",
    "posix/Europe/London",
    "right/UTC",
    "zone.tab",
    "Europe/London ",
    "",
]
ZONES = ["UTC", "Europe/London", "America/Argentina/Buenos_Aires", "Etc/GMT+5"]


async def _calendar_create(client: Any, tenant: Any, zone: str) -> Any:
    body = {"name": "Consultations", "timezone": zone, "availability": WINDOW}
    return await client.post(CALENDARS, json=body, headers=tenant.headers)


async def _calendar_patch(client: Any, tenant: Any, zone: str) -> Any:
    calendar = await create_calendar(client, tenant)
    return await client.patch(
        f"{CALENDARS}/{calendar['id']}", json={"timezone": zone}, headers=tenant.headers
    )


async def _agent_create(client: Any, tenant: Any, zone: str) -> Any:
    await connect(client, tenant)
    return await client.post(
        CREATE_AGENT, json=agent_body(tenant, timezone=zone), headers=tenant.headers
    )


async def _agent_patch(client: Any, tenant: Any, zone: str) -> Any:
    agent_id = await make_agent(client, tenant)
    return await client.patch(
        f"{AGENTS}/{agent_id}", json={"timezone": zone}, headers=tenant.headers
    )


async def _business_hours(client: Any, tenant: Any, zone: str) -> Any:
    body = {
        "name": "Spring sale",
        "campaign_type": "email",
        "subject": "Spring sale",
        "message_content": "<p>Hello</p>",
        "business_hours_enabled": True,
        "business_hours_config": {"timezone": zone, **HOURS},
    }
    return await client.post(CAMPAIGNS, json=body, headers=tenant.headers)


async def _calling_window(client: Any, tenant: Any, zone: str) -> Any:
    agent_id = await make_agent(client, tenant)
    contacts = await callees(client, tenant, 1)
    body = call_body(agent_id, contacts, calling_window={"timezone": zone, **HOURS})
    return await client.post(CAMPAIGNS, json=body, headers=tenant.headers)


# (the request, the field its error names, what it would have stored)
FIELDS = {
    "calendar": (_calendar_create, "timezone", "SELECT timezone FROM calendars"),
    "calendar PATCH": (_calendar_patch, "timezone", "SELECT timezone FROM calendars"),
    "agent": (_agent_create, "timezone", "SELECT timezone FROM agents"),
    "agent PATCH": (_agent_patch, "timezone", "SELECT timezone FROM agents"),
    "business hours": (
        _business_hours,
        "business_hours_config.timezone",
        "SELECT business_hours_config ->> 'timezone' FROM campaigns",
    ),
    "calling window": (
        _calling_window,
        "calling_window.timezone",
        "SELECT calling_window ->> 'timezone' FROM campaigns",
    ),
}


def test_the_allow_list_is_the_iana_zones_only():
    names = timezones.names()
    assert {"UTC", "Europe/London", "America/New_York", "Etc/GMT+5"} <= names
    assert not names & {"localtime", "posixrules", "Factory"}
    assert not [name for name in names if name.startswith(("posix/", "right/", "/", "."))]


@pytest.mark.parametrize("zone", NOT_ZONES)
@pytest.mark.parametrize("field", list(FIELDS))
async def test_a_name_that_is_no_iana_zone_is_400_naming_the_field(
    client, pool, tenant, field, zone
):
    request, name, stored = FIELDS[field]

    response = await request(client, tenant, zone)

    answer = await expect_error(response, 400, "validation_error")
    assert name in [detail["field"] for detail in answer["error"]["details"]], answer
    assert zone not in [row[0] for row in await tenant_sql(pool, tenant, stored)]


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("field", list(FIELDS))
async def test_iana_zone_names_are_taken(client, pool, tenant, field, zone):
    request, _, stored = FIELDS[field]

    response = await request(client, tenant, zone)

    assert response.status_code in (200, 201), await response.get_data(as_text=True)
    assert zone in [row[0] for row in await tenant_sql(pool, tenant, stored)]
