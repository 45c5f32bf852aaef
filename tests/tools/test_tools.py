"""Tools (CONTRACT 10, 10a): create, list, read, change and delete, each rule on its own."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from api.tools.service import agent_tools
from tenancy import secrets
from tenancy.db import tenant_transaction
from tests.factories import TOOLS, create_calendar, make_agent, make_tool, tool_body
from tests.helpers import error_of, expect_error, tenant_sql

AGENTS = "/webhooks/inbound/agents"
SEND_SMS = {
    "name": "text_contact",
    "type": "send_sms",
    "description": "Send the contact a text message.",
}
TRANSFER = {
    "name": "to_sales",
    "type": "transfer_call",
    "description": "Hand over to sales.",
    "config": {"phone_number": "+14155550100", "message": "Connecting you now."},
}


async def post_tool(client, tenant, body):
    return await client.post(TOOLS, json=body, headers=tenant.headers)


async def patch_tool(client, tenant, tool_id, body):
    return await client.patch(f"{TOOLS}/{tool_id}", json=body, headers=tenant.headers)


async def refused(response, field):
    """400 validation_error naming `field` (a detail's field starts with it)."""
    body = await expect_error(response, 400, "validation_error")
    fields = [detail["field"] for detail in body["error"].get("details", [])]
    assert any(name == field or name.startswith(f"{field}.") for name in fields), body
    return body


async def stored_tool(pool, tenant, tool_id):
    rows = await tenant_sql(pool, tenant, "SELECT * FROM tools WHERE id = $1", uuid.UUID(tool_id))
    return dict(rows[0]) if rows else None


async def tool_count(pool, tenant):
    return (await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM tools"))[0]["n"]


# --- create -------------------------------------------------------------------------------------


async def test_create_http_tool_answers_201_with_the_whole_tool(client, tenant):
    body = tool_body(name="lookup_order")
    response = await post_tool(client, tenant, body)
    assert response.status_code == 201
    answer = await response.get_json()
    assert answer["status"] == "success"
    tool = answer["tool"]
    assert set(tool) == {
        "id",
        "name",
        "type",
        "description",
        "parameters",
        "config",
        "secret",
        "created_at",
        "updated_at",
    }
    assert (tool["name"], tool["type"], tool["description"]) == (
        "lookup_order",
        "http",
        body["description"],
    )
    assert tool["parameters"] == body["parameters"]
    assert tool["config"] == {
        "url": "https://tools.example.com/orders",
        "headers": {"Authorization": "***"},
        "timeout_seconds": 10,
    }
    assert tool["secret"].startswith("whsec_")
    assert tool["created_at"].endswith("Z")


async def test_http_tool_parameters_default_to_an_empty_object(client, tenant):
    tool = await make_tool(client, tenant, parameters=...)
    assert tool["parameters"] == {"type": "object", "properties": {}, "required": []}


async def test_create_transfer_call_tool_has_fixed_parameters(client, tenant):
    response = await post_tool(client, tenant, TRANSFER)
    assert response.status_code == 201
    tool = (await response.get_json())["tool"]
    assert tool["config"] == {"phone_number": "+14155550100", "message": "Connecting you now."}
    assert tool["parameters"] == {"type": "object", "properties": {}, "required": []}


async def test_transfer_call_message_is_optional(client, tenant):
    body = {**TRANSFER, "config": {"phone_number": "+14155550100"}}
    tool = (await (await post_tool(client, tenant, body)).get_json())["tool"]
    assert tool["config"] == {"phone_number": "+14155550100", "message": None}


async def test_create_send_sms_tool_takes_content_only(client, tenant):
    response = await post_tool(client, tenant, SEND_SMS)
    assert response.status_code == 201
    tool = (await response.get_json())["tool"]
    assert tool["config"] == {}
    assert tool["parameters"]["properties"]["content"]["type"] == "string"
    assert tool["parameters"]["required"] == ["content"]


async def test_each_tool_has_its_own_secret(client, tenant):
    first = await make_tool(client, tenant)
    second = await make_tool(client, tenant)
    assert first["secret"] != second["secret"]


# --- name and description -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["1lookup", "_lookup", "look-up", "look up", "", "a" * 65, "caf\u00e9"]
)
async def test_name_not_matching_the_pattern_is_400(client, pool, tenant, name):
    await refused(await post_tool(client, tenant, tool_body(name=name)), "name")
    assert await tool_count(pool, tenant) == 0


async def test_name_of_64_characters_is_accepted(client, tenant):
    tool = await make_tool(client, tenant, name="a" * 64)
    assert tool["name"] == "a" * 64


async def test_end_call_as_a_name_is_400(client, pool, tenant):
    await refused(await post_tool(client, tenant, tool_body(name="end_call")), "name")
    assert await tool_count(pool, tenant) == 0


@pytest.mark.parametrize("name", ["END_CALL", "End_Call", "end_CALL"])
async def test_end_call_in_any_case_is_400(client, pool, tenant, name):
    await refused(await post_tool(client, tenant, tool_body(name=name)), "name")
    assert await tool_count(pool, tenant) == 0


async def test_a_name_taken_in_another_case_is_409_tool_name_taken(client, pool, tenant):
    await make_tool(client, tenant, name="Book")
    response = await post_tool(client, tenant, tool_body(name="book"))
    await expect_error(response, 409, "tool_name_taken")
    assert [row["name"] for row in await tenant_sql(pool, tenant, "SELECT name FROM tools")] == [
        "Book"
    ]


async def test_concurrent_creates_of_one_name_in_two_cases_make_one_tool(client, pool, tenant):
    responses = await asyncio.gather(
        *(post_tool(client, tenant, tool_body(name=name)) for name in ["Racer", "racer"] * 4)
    )
    assert sorted(response.status_code for response in responses) == [201] + [409] * 7
    assert await tool_count(pool, tenant) == 1


async def test_a_name_taken_in_the_sub_account_is_409_tool_name_taken(client, pool, tenant):
    await make_tool(client, tenant, name="lookup")
    response = await post_tool(client, tenant, tool_body(name="lookup"))
    await expect_error(response, 409, "tool_name_taken")
    assert await tool_count(pool, tenant) == 1


async def test_the_same_name_in_another_sub_account_is_fine(client, tenant, tenant_second):
    await make_tool(client, tenant, name="lookup")
    assert (await make_tool(client, tenant_second, name="lookup"))["name"] == "lookup"


async def test_concurrent_creates_of_one_name_make_one_tool(client, pool, tenant):
    responses = await asyncio.gather(
        *(post_tool(client, tenant, tool_body(name="racer")) for _ in range(8))
    )
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [201] + [409] * 7
    for response in responses:
        if response.status_code == 409:
            await expect_error(response, 409, "tool_name_taken")
    assert await tool_count(pool, tenant) == 1


@pytest.mark.parametrize("description", ["", "   ", "d" * 1001])
async def test_description_outside_1_to_1000_characters_is_400(client, tenant, description):
    await refused(
        await post_tool(client, tenant, tool_body(description=description)), "description"
    )


async def test_description_of_1000_characters_is_accepted(client, tenant):
    assert (await make_tool(client, tenant, description="d" * 1000))["description"] == "d" * 1000


# --- type ---------------------------------------------------------------------------------------


def calendar_tool(kind: str, calendar_id: Any) -> dict[str, Any]:
    return {
        "name": kind,
        "type": kind,
        "description": "Calendar work.",
        "config": {"calendar_id": str(calendar_id)},
    }


@pytest.mark.parametrize("kind", ["check_availability", "book_appointment"])
async def test_calendar_tools_work_on_a_calendar_of_the_sub_account(client, tenant, kind):
    calendar = await create_calendar(client, tenant)
    response = await post_tool(client, tenant, calendar_tool(kind, calendar["id"]))
    assert response.status_code == 201, await response.get_data(as_text=True)
    tool = (await response.get_json())["tool"]
    assert tool["type"] == kind
    assert tool["config"] == {"calendar_id": calendar["id"]}
    read = await client.get(f"{TOOLS}/{tool['id']}", headers=tenant.headers)
    assert (await read.get_json())["tool"]["config"] == {"calendar_id": calendar["id"]}


async def test_calendar_tools_have_fixed_parameters(client, tenant):
    calendar = await create_calendar(client, tenant)
    check = await make_calendar_tool(client, tenant, "check_availability", calendar["id"])
    assert check["parameters"]["properties"]["date"]["type"] == "string"
    assert check["parameters"]["required"] == []
    booking = await make_calendar_tool(client, tenant, "book_appointment", calendar["id"])
    assert booking["parameters"]["properties"]["start"]["type"] == "string"
    assert booking["parameters"]["required"] == ["start"]
    body = {**calendar_tool("book_appointment", calendar["id"]), "name": "other"}
    body["parameters"] = {"type": "object", "properties": {}}
    await refused(await post_tool(client, tenant, body), "parameters")


async def make_calendar_tool(client, tenant, kind, calendar_id):
    response = await post_tool(client, tenant, calendar_tool(kind, calendar_id))
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["tool"]


@pytest.mark.parametrize("kind", ["check_availability", "book_appointment"])
async def test_calendar_of_another_sub_account_is_404(client, pool, tenant, tenant_second, kind):
    theirs = await create_calendar(client, tenant_second)
    response = await post_tool(client, tenant, calendar_tool(kind, theirs["id"]))
    await expect_error(response, 404, "not_found")
    missing = await post_tool(client, tenant, calendar_tool(kind, uuid.uuid4()))
    await expect_error(missing, 404, "not_found")
    assert await tool_count(pool, tenant) == 0


@pytest.mark.parametrize("kind", ["check_availability", "book_appointment"])
async def test_calendar_tools_need_a_calendar_id(client, pool, tenant, kind):
    body = calendar_tool(kind, uuid.uuid4())
    await refused(await post_tool(client, tenant, {**body, "config": {}}), "config.calendar_id")
    del body["config"]
    await refused(await post_tool(client, tenant, body), "config.calendar_id")
    bad = {**body, "config": {"calendar_id": "not-a-uuid"}}
    # An id that is no UUID is invalid_uuid, in a body as in a path (CONTRACT 2).
    not_an_id = await expect_error(await post_tool(client, tenant, bad), 400, "invalid_uuid")
    assert [d["field"] for d in not_an_id["error"]["details"]] == ["config.calendar_id"]
    assert await tool_count(pool, tenant) == 0


async def test_calendar_tool_config_change_checks_the_calendar(client, tenant, tenant_second):
    mine = await create_calendar(client, tenant)
    other = await create_calendar(client, tenant, name="Second")
    theirs = await create_calendar(client, tenant_second)
    tool = await make_calendar_tool(client, tenant, "book_appointment", mine["id"])
    moved = await patch_tool(client, tenant, tool["id"], {"config": {"calendar_id": other["id"]}})
    assert moved.status_code == 200, await moved.get_data(as_text=True)
    assert (await moved.get_json())["tool"]["config"] == {"calendar_id": other["id"]}
    refused_change = await patch_tool(
        client, tenant, tool["id"], {"config": {"calendar_id": theirs["id"]}}
    )
    await expect_error(refused_change, 404, "not_found")
    read = await client.get(f"{TOOLS}/{tool['id']}", headers=tenant.headers)
    assert (await read.get_json())["tool"]["config"] == {"calendar_id": other["id"]}
    await refused(await patch_tool(client, tenant, tool["id"], {"config": {}}), "config")


@pytest.mark.parametrize("kind", ["webhook", "HTTP", ""])
async def test_unknown_type_is_400(client, tenant, kind):
    await refused(await post_tool(client, tenant, tool_body(type=kind)), "type")


# --- http parameters ----------------------------------------------------------------------------


def _parameters(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


async def test_http_parameters_with_enums_and_descriptions_are_kept(client, tenant):
    parameters = {
        "type": "object",
        "properties": {
            "size": {"type": "string", "enum": ["s", "m", "l"], "description": "Shirt size"},
            "count": {"type": "integer", "enum": [1, 2, 3]},
            "price": {"type": "number"},
            "gift": {"type": "boolean"},
        },
        "required": ["size", "count"],
    }
    tool = await make_tool(client, tenant, parameters=parameters)
    assert tool["parameters"] == parameters


async def test_http_parameters_with_more_than_20_properties_are_400(client, tenant):
    many = {f"p{index}": {"type": "string"} for index in range(21)}
    await refused(
        await post_tool(client, tenant, tool_body(parameters=_parameters(**many))), "parameters"
    )


async def test_http_parameters_with_20_properties_are_accepted(client, tenant):
    many = {f"p{index}": {"type": "string"} for index in range(20)}
    tool = await make_tool(client, tenant, parameters=_parameters(**many))
    assert len(tool["parameters"]["properties"]) == 20


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "properties": {}},
        {"properties": {}},
        _parameters(address={"type": "object"}),
        _parameters(tags={"type": "array", "items": {"type": "string"}}),
        _parameters(size={"type": "string", "minLength": 3}),
        {**_parameters(), "additionalProperties": False},
        _parameters(**{"bad-name": {"type": "string"}}),
    ],
)
async def test_http_parameters_outside_the_json_schema_bounds_are_400(client, tenant, schema):
    await refused(await post_tool(client, tenant, tool_body(parameters=schema)), "parameters")


async def test_http_parameters_required_must_name_properties(client, tenant):
    schema = {**_parameters(a={"type": "string"}), "required": ["a", "b"]}
    await refused(await post_tool(client, tenant, tool_body(parameters=schema)), "parameters")


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "integer", "enum": ["one"]},
        {"type": "string", "enum": [1]},
        {"type": "boolean", "enum": [1]},
        {"type": "integer", "enum": [1.5]},
        {"type": "string", "enum": []},
        {"type": "string", "enum": ["a", "a"]},
        {"type": "string", "description": "d" * 1001},
    ],
)
async def test_http_parameter_enum_and_description_bounds_are_400(client, tenant, prop):
    schema = _parameters(choice=prop)
    await refused(await post_tool(client, tenant, tool_body(parameters=schema)), "parameters")


# --- http config --------------------------------------------------------------------------------


async def test_http_config_is_required(client, tenant):
    await refused(await post_tool(client, tenant, tool_body(config=...)), "config")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://tools.example.com/x",
        "tools.example.com/orders",
        "https://tools.example.com/a b",
        "https://example.com/\r\nX: 1",
        "https://tools.example.com/\x00",
    ],
)
async def test_http_url_that_is_no_http_url_is_400(client, pool, tenant, url):
    body = tool_body(config={"url": url})
    assert (await post_tool(client, tenant, body)).status_code == 400
    assert await tool_count(pool, tenant) == 0


@pytest.fixture
def private_off(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = app.app.config["SETTINGS"]
    monkeypatch.setitem(
        app.app.config, "SETTINGS", settings.model_copy(update={"allow_private_webhooks": False})
    )


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "10.0.0.7", "[::1]", "169.254.169.254", "192.0.0.8", "0x7f000001"]
)
async def test_http_url_to_a_private_address_is_400_webhook_url_not_allowed(
    client, pool, tenant, private_off, host
):
    body = tool_body(config={"url": f"http://{host}:8080/tool"})
    await expect_error(await post_tool(client, tenant, body), 400, "webhook_url_not_allowed")
    assert await tool_count(pool, tenant) == 0


async def test_http_url_to_a_private_address_is_accepted_when_private_webhooks_are_allowed(
    client, tenant
):
    tool = await make_tool(client, tenant, config={"url": "http://127.0.0.1:9/tool"})
    assert tool["config"]["url"] == "http://127.0.0.1:9/tool"


async def test_http_config_with_more_than_10_headers_is_400(client, tenant):
    headers = {f"X-Header-{index}": "v" for index in range(11)}
    body = tool_body(config={"url": "https://tools.example.com/x", "headers": headers})
    await refused(await post_tool(client, tenant, body), "config.headers")


async def test_http_config_with_10_headers_is_accepted(client, tenant):
    headers = {f"X-Header-{index}": "v" for index in range(10)}
    tool = await make_tool(
        client, tenant, config={"url": "https://tools.example.com/x", "headers": headers}
    )
    assert tool["config"]["headers"] == dict.fromkeys(headers, "***")


@pytest.mark.parametrize("name", ["X Header", "X:Header", "", "X-\u00e9", "X\nY", "h" * 101])
async def test_http_header_name_that_is_no_http_token_is_400(client, tenant, name):
    body = tool_body(config={"url": "https://tools.example.com/x", "headers": {name: "v"}})
    assert (await post_tool(client, tenant, body)).status_code == 400


@pytest.mark.parametrize(
    "value", ["a\r\nX-Injected: 1", "a\nb", "tab\there", "\x00", "", "caf\u00e9", "v" * 2001]
)
async def test_http_header_value_that_is_not_header_safe_is_400(client, tenant, value):
    body = tool_body(config={"url": "https://tools.example.com/x", "headers": {"X-Key": value}})
    assert (await post_tool(client, tenant, body)).status_code == 400


@pytest.mark.parametrize(
    "name",
    [
        "Host",
        "content-length",
        "Content-Type",
        "Transfer-Encoding",
        "webhook-signature",
        "Webhook-Id",
    ],
)
async def test_http_headers_the_request_sets_itself_are_400(client, tenant, name):
    body = tool_body(config={"url": "https://tools.example.com/x", "headers": {name: "v"}})
    await refused(await post_tool(client, tenant, body), "config.headers")


async def test_http_header_named_twice_in_different_case_is_400(client, tenant):
    body = tool_body(
        config={"url": "https://tools.example.com/x", "headers": {"X-Key": "a", "x-key": "b"}}
    )
    await refused(await post_tool(client, tenant, body), "config.headers")


async def test_masked_header_value_on_create_is_400(client, tenant):
    body = tool_body(config={"url": "https://tools.example.com/x", "headers": {"X-Key": "***"}})
    await refused(await post_tool(client, tenant, body), "config.headers.X-Key")


@pytest.mark.parametrize("seconds", [0, 21, 0.5, "10", -1, 10**20])
async def test_http_timeout_outside_1_to_20_seconds_is_400(client, tenant, seconds):
    body = tool_body(config={"url": "https://tools.example.com/x", "timeout_seconds": seconds})
    await refused(await post_tool(client, tenant, body), "config.timeout_seconds")


@pytest.mark.parametrize("seconds", [1, 20, 5.0])
async def test_http_timeout_of_1_to_20_seconds_is_accepted(client, tenant, seconds):
    tool = await make_tool(
        client, tenant, config={"url": "https://tools.example.com/x", "timeout_seconds": seconds}
    )
    assert tool["config"]["timeout_seconds"] == int(seconds)


async def test_http_config_with_an_unknown_key_is_400(client, tenant):
    body = tool_body(config={"url": "https://tools.example.com/x", "method": "GET"})
    await refused(await post_tool(client, tenant, body), "config.method")


# --- transfer_call and send_sms -----------------------------------------------------------------


@pytest.mark.parametrize(
    "number", ["4155550100", "+1415555010", "+999123", "+14155550100 x", "", "+0123456789"]
)
async def test_transfer_phone_number_that_is_not_valid_e164_is_400(client, pool, tenant, number):
    body = {**TRANSFER, "config": {"phone_number": number}}
    await refused(await post_tool(client, tenant, body), "config.phone_number")
    assert await tool_count(pool, tenant) == 0


async def test_transfer_message_over_500_characters_is_400(client, tenant):
    body = {**TRANSFER, "config": {"phone_number": "+14155550100", "message": "m" * 501}}
    await refused(await post_tool(client, tenant, body), "config.message")


async def test_transfer_call_without_config_is_400(client, tenant):
    body = {key: value for key, value in TRANSFER.items() if key != "config"}
    await refused(await post_tool(client, tenant, body), "config.phone_number")


@pytest.mark.parametrize("base", [SEND_SMS, TRANSFER])
async def test_parameters_of_a_tool_with_fixed_parameters_are_400(client, pool, tenant, base):
    body = {**base, "parameters": {"type": "object", "properties": {}}}
    await refused(await post_tool(client, tenant, body), "parameters")
    assert await tool_count(pool, tenant) == 0


async def test_send_sms_config_with_a_key_is_400(client, tenant):
    body = {**SEND_SMS, "config": {"from": "+14155550100"}}
    await refused(await post_tool(client, tenant, body), "config.from")


# --- reads --------------------------------------------------------------------------------------


async def test_get_tool_shows_it_with_its_secret_and_masked_headers(client, tenant):
    created = await make_tool(client, tenant)
    response = await client.get(f"{TOOLS}/{created['id']}", headers=tenant.headers)
    assert response.status_code == 200
    assert await response.get_json() == {"status": "success", "tool": created}


async def test_get_unknown_tool_is_404(client, tenant):
    response = await client.get(f"{TOOLS}/{uuid.uuid4()}", headers=tenant.headers)
    await expect_error(response, 404, "not_found")


async def test_get_tool_with_a_malformed_id_is_400_invalid_uuid(client, tenant):
    response = await client.get(f"{TOOLS}/not-a-uuid", headers=tenant.headers)
    await expect_error(response, 400, "invalid_uuid")


async def test_tools_list_newest_first_with_the_general_envelope(client, tenant):
    made = [await make_tool(client, tenant) for _ in range(3)]
    response = await client.get(f"{TOOLS}?limit=2", headers=tenant.headers)
    page = await response.get_json()
    assert response.status_code == 200
    assert [tool["id"] for tool in page["tools"]] == [made[2]["id"], made[1]["id"]]
    assert (page["total"], page["limit"], page["offset"], page["has_more"]) == (3, 2, 0, True)
    rest = await (await client.get(f"{TOOLS}?limit=2&offset=2", headers=tenant.headers)).get_json()
    assert [tool["id"] for tool in rest["tools"]] == [made[0]["id"]]
    assert rest["has_more"] is False
    assert page["tools"][0] == made[2]


async def test_empty_tools_list_has_the_general_envelope(client, tenant):
    response = await client.get(TOOLS, headers=tenant.headers)
    assert await response.get_json() == {
        "status": "success",
        "tools": [],
        "total": 0,
        "limit": 50,
        "offset": 0,
        "has_more": False,
    }


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "limit=x", "offset=-1"])
async def test_tools_list_bad_page_values_are_400(client, tenant, query):
    await expect_error(
        await client.get(f"{TOOLS}?{query}", headers=tenant.headers), 400, "validation_error"
    )


# --- PATCH --------------------------------------------------------------------------------------


async def test_patch_changes_name_and_description_only(client, pool, tenant):
    tool = await make_tool(client, tenant)
    before = await stored_tool(pool, tenant, tool["id"])
    response = await patch_tool(
        client, tenant, tool["id"], {"name": "renamed", "description": "New words."}
    )
    assert response.status_code == 200
    changed = (await response.get_json())["tool"]
    assert (changed["name"], changed["description"]) == ("renamed", "New words.")
    assert (changed["config"], changed["parameters"], changed["secret"]) == (
        tool["config"],
        tool["parameters"],
        tool["secret"],
    )
    after = await stored_tool(pool, tenant, tool["id"])
    assert {key for key in before if before[key] != after[key]} == {
        "name",
        "description",
        "updated_at",
    }
    shown = await (await client.get(f"{TOOLS}/{tool['id']}", headers=tenant.headers)).get_json()
    assert shown["tool"] == changed


@pytest.mark.parametrize("field", ["type", "parameters"])
async def test_type_or_parameters_in_a_patch_body_is_400(client, pool, tenant, field):
    tool = await make_tool(client, tenant)
    before = await stored_tool(pool, tenant, tool["id"])
    value = "http" if field == "type" else tool["parameters"]
    response = await patch_tool(client, tenant, tool["id"], {"name": "other", field: value})
    await refused(response, field)
    assert await stored_tool(pool, tenant, tool["id"]) == before


async def test_patch_with_nothing_to_change_is_400_nothing_to_update(client, tenant):
    tool = await make_tool(client, tenant)
    await expect_error(await patch_tool(client, tenant, tool["id"], {}), 400, "nothing_to_update")


@pytest.mark.parametrize("field", ["name", "description", "config"])
async def test_patch_null_field_is_400(client, tenant, field):
    tool = await make_tool(client, tenant)
    await refused(await patch_tool(client, tenant, tool["id"], {field: None}), field)


async def test_patch_to_a_taken_name_is_409_tool_name_taken(client, pool, tenant):
    await make_tool(client, tenant, name="taken")
    tool = await make_tool(client, tenant)
    await expect_error(
        await patch_tool(client, tenant, tool["id"], {"name": "taken"}), 409, "tool_name_taken"
    )
    assert (await stored_tool(pool, tenant, tool["id"]))["name"] == tool["name"]


async def test_patch_to_end_call_is_400(client, tenant):
    tool = await make_tool(client, tenant)
    await refused(await patch_tool(client, tenant, tool["id"], {"name": "end_call"}), "name")


async def test_patch_to_end_call_in_another_case_is_400(client, pool, tenant):
    tool = await make_tool(client, tenant)
    await refused(await patch_tool(client, tenant, tool["id"], {"name": "End_Call"}), "name")
    assert (await stored_tool(pool, tenant, tool["id"]))["name"] == tool["name"]


async def test_patch_to_a_name_taken_in_another_case_is_409_tool_name_taken(client, pool, tenant):
    await make_tool(client, tenant, name="Book")
    tool = await make_tool(client, tenant)
    await expect_error(
        await patch_tool(client, tenant, tool["id"], {"name": "BOOK"}), 409, "tool_name_taken"
    )
    assert (await stored_tool(pool, tenant, tool["id"]))["name"] == tool["name"]


async def test_patch_to_its_own_name_in_another_case_is_fine(client, pool, tenant):
    tool = await make_tool(client, tenant, name="Book")
    response = await patch_tool(client, tenant, tool["id"], {"name": "book"})
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await stored_tool(pool, tenant, tool["id"]))["name"] == "book"


async def test_patch_config_replaces_the_whole_config(client, tenant):
    tool = await make_tool(
        client,
        tenant,
        config={
            "url": "https://tools.example.com/a",
            "headers": {"X-Key": "k"},
            "timeout_seconds": 5,
        },
    )
    response = await patch_tool(
        client, tenant, tool["id"], {"config": {"url": "https://tools.example.com/b"}}
    )
    assert (await response.get_json())["tool"]["config"] == {
        "url": "https://tools.example.com/b",
        "headers": {},
        "timeout_seconds": 10,
    }


async def _plain_tools(pool, tenant, agent_id):
    async with tenant_transaction(pool, tenant.schema) as conn:
        return await agent_tools(conn, uuid.UUID(agent_id))


async def test_patch_header_sent_as_mask_keeps_its_stored_value(client, pool, tenant):
    tool = await make_tool(
        client,
        tenant,
        config={
            "url": "https://tools.example.com/a",
            "headers": {"X-Key": "kept", "X-Old": "gone"},
        },
    )
    response = await patch_tool(
        client,
        tenant,
        tool["id"],
        {
            "config": {
                "url": "https://tools.example.com/a",
                "headers": {"x-key": "***", "X-New": "fresh"},
                "timeout_seconds": 7,
            }
        },
    )
    assert response.status_code == 200
    assert (await response.get_json())["tool"]["config"]["headers"] == {
        "x-key": "***",
        "X-New": "***",
    }
    agent_id = await make_agent(client, tenant, tool_ids=[tool["id"]])
    [plain] = await _plain_tools(pool, tenant, agent_id)
    assert plain["config"]["headers"] == {"x-key": "kept", "X-New": "fresh"}


async def test_patch_masked_header_the_tool_does_not_have_is_400(client, pool, tenant):
    tool = await make_tool(client, tenant)
    before = await stored_tool(pool, tenant, tool["id"])
    response = await patch_tool(
        client,
        tenant,
        tool["id"],
        {"config": {"url": "https://tools.example.com/a", "headers": {"X-Unknown": "***"}}},
    )
    await refused(response, "config.headers.X-Unknown")
    assert await stored_tool(pool, tenant, tool["id"]) == before


async def test_patch_config_follows_the_tools_type(client, tenant):
    tool = (await (await post_tool(client, tenant, TRANSFER)).get_json())["tool"]
    await refused(
        await patch_tool(
            client, tenant, tool["id"], {"config": {"url": "https://tools.example.com/x"}}
        ),
        "config",
    )
    changed = await patch_tool(
        client, tenant, tool["id"], {"config": {"phone_number": "+14155550111"}}
    )
    assert (await changed.get_json())["tool"]["config"] == {
        "phone_number": "+14155550111",
        "message": None,
    }


async def test_patch_url_to_a_private_address_is_400_webhook_url_not_allowed(
    client, pool, tenant, private_off
):
    tool = await make_tool(client, tenant, config={"url": "https://93.184.215.14/tool"})
    before = await stored_tool(pool, tenant, tool["id"])
    response = await patch_tool(
        client, tenant, tool["id"], {"config": {"url": "http://169.254.169.254/latest"}}
    )
    await expect_error(response, 400, "webhook_url_not_allowed")
    assert await stored_tool(pool, tenant, tool["id"]) == before


async def test_patch_unknown_tool_is_404(client, tenant):
    await expect_error(
        await patch_tool(client, tenant, uuid.uuid4(), {"name": "x"}), 404, "not_found"
    )


# --- DELETE -------------------------------------------------------------------------------------


async def test_delete_tool_answers_200_and_it_is_gone(client, pool, tenant):
    tool = await make_tool(client, tenant)
    response = await client.delete(f"{TOOLS}/{tool['id']}", headers=tenant.headers)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "deleted": True,
        "tool_id": tool["id"],
    }
    assert await stored_tool(pool, tenant, tool["id"]) is None
    gone = await client.get(f"{TOOLS}/{tool['id']}", headers=tenant.headers)
    await expect_error(gone, 404, "not_found")
    again = await client.delete(f"{TOOLS}/{tool['id']}", headers=tenant.headers)
    await expect_error(again, 404, "not_found")


async def test_delete_tool_an_agent_uses_is_409_tool_in_use(client, pool, tenant):
    tool = await make_tool(client, tenant)
    await make_agent(client, tenant, tool_ids=[tool["id"]])
    response = await client.delete(f"{TOOLS}/{tool['id']}", headers=tenant.headers)
    await expect_error(response, 409, "tool_in_use")
    assert await stored_tool(pool, tenant, tool["id"]) is not None


async def test_delete_tool_after_the_agent_let_it_go_is_200(client, tenant):
    tool = await make_tool(client, tenant)
    agent_id = await make_agent(client, tenant, tool_ids=[tool["id"]])
    patched = await client.patch(
        f"{AGENTS}/{agent_id}", json={"tool_ids": []}, headers=tenant.headers
    )
    assert patched.status_code == 200
    response = await client.delete(f"{TOOLS}/{tool['id']}", headers=tenant.headers)
    assert response.status_code == 200


async def test_a_deleted_agent_does_not_keep_its_tools_in_use(client, tenant):
    tool = await make_tool(client, tenant)
    agent_id = await make_agent(client, tenant, tool_ids=[tool["id"]])
    assert (await client.delete(f"{AGENTS}/{agent_id}", headers=tenant.headers)).status_code == 200
    assert (await client.delete(f"{TOOLS}/{tool['id']}", headers=tenant.headers)).status_code == 200


async def test_delete_racing_an_agent_that_takes_the_tool_never_leaves_a_dangling_id(
    client, pool, tenant
):
    agent_id = await make_agent(client, tenant)
    for _ in range(6):
        tool = await make_tool(client, tenant)
        deleted, patched = await asyncio.gather(
            client.delete(f"{TOOLS}/{tool['id']}", headers=tenant.headers),
            client.patch(
                f"{AGENTS}/{agent_id}", json={"tool_ids": [tool["id"]]}, headers=tenant.headers
            ),
        )
        outcome = (deleted.status_code, patched.status_code)
        assert outcome in ((409, 200), (200, 404)), outcome
        if outcome == (200, 404):
            await expect_error(patched, 404, "not_found")
        else:
            await expect_error(deleted, 409, "tool_in_use")
            await client.patch(
                f"{AGENTS}/{agent_id}", json={"tool_ids": []}, headers=tenant.headers
            )
        rows = await tenant_sql(
            pool, tenant, "SELECT tool_ids FROM agents WHERE id = $1", uuid.UUID(agent_id)
        )
        for held in rows[0]["tool_ids"]:
            assert await stored_tool(pool, tenant, str(held)) is not None


# --- stored secrets, the runtime's view ---------------------------------------------------------


async def test_tool_secret_and_header_values_are_stored_encrypted(client, pool, tenant):
    header_value = "Bearer " + uuid.uuid4().hex
    tool = await make_tool(
        client,
        tenant,
        config={"url": "https://tools.example.com/a", "headers": {"Authorization": header_value}},
    )
    row = await stored_tool(pool, tenant, tool["id"])
    text = json.dumps({key: str(value) for key, value in row.items()})
    assert tool["secret"] not in text and header_value not in text
    assert secrets.decrypt(row["secret"]) == tool["secret"]
    assert json.loads(secrets.decrypt(row["header_values"])) == {"Authorization": header_value}
    assert row["config"]["headers"] == {"Authorization": "***"}


async def test_a_tool_without_headers_stores_no_header_values(client, pool, tenant):
    tool = await make_tool(client, tenant, config={"url": "https://tools.example.com/a"})
    assert (await stored_tool(pool, tenant, tool["id"]))["header_values"] is None


async def test_agent_tools_gives_the_runtime_plain_secrets_in_tool_ids_order(client, pool, tenant):
    http = await make_tool(
        client, tenant, config={"url": "https://tools.example.com/a", "headers": {"X-Key": "plain"}}
    )
    sms = (await (await post_tool(client, tenant, SEND_SMS)).get_json())["tool"]
    agent_id = await make_agent(client, tenant, tool_ids=[sms["id"], http["id"]])
    plain = await _plain_tools(pool, tenant, agent_id)
    assert [tool["id"] for tool in plain] == [uuid.UUID(sms["id"]), uuid.UUID(http["id"])]
    assert plain[1]["config"]["headers"] == {"X-Key": "plain"}
    assert plain[1]["secret"] == http["secret"] and plain[0]["secret"] == sms["secret"]
    assert plain[0]["parameters"] == sms["parameters"]


async def test_agent_tools_of_an_agent_without_tools_is_empty(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    assert await _plain_tools(pool, tenant, agent_id) == []


async def test_a_refused_tool_leaves_nothing_behind(client, pool, tenant):
    body = tool_body(config={"url": "https://tools.example.com/x", "timeout_seconds": 99})
    error = await error_of(await post_tool(client, tenant, body), 400)
    assert error["code"] == "validation_error"
    assert await tool_count(pool, tenant) == 0
