"""GET /conversations, GET /conversations/{id}/messages and PATCH /conversations/{id}
(CONTRACT 7 "Conversations", 9)."""

from __future__ import annotations

import json
import uuid

import pytest

from api.conversations.signing import HEADER, sign
from tests.factories import add_contact, send_message
from tests.helpers import expect_error, tenant_sql

CONVERSATIONS = "/webhooks/inbound/conversations"
MESSAGE_FIELDS = {
    "id",
    "conversation_id",
    "contact_id",
    "content",
    "subject",
    "sender_type",
    "message_type",
    "status",
    "direction",
    "delivery_status",
    "provider_message_id",
    "timestamp",
    # CONTRACT 10: a scheduled message's time, and why a message failed.
    "send_at",
    "error",
}


async def text_in(client, tenant, from_number, body):
    """A sandbox inbound text from `from_number`; its conversation id."""
    raw = json.dumps(
        {"from": from_number, "body": body, "message_id": f"SM{uuid.uuid4().hex}"}
    ).encode()
    response = await client.post(
        f"/webhooks/providers/sandbox/sms/{tenant.id}",
        data=raw,
        headers={"Content-Type": "application/json", HEADER: sign(tenant.id, raw)},
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    return (await response.get_json())["conversation_id"]


async def get(client, tenant, path):
    return await client.get(path, headers=tenant.headers)


async def read_states(pool, tenant):
    rows = await tenant_sql(
        pool, tenant, "SELECT read_at FROM messages WHERE direction = 'inbound'"
    )
    return [row["read_at"] is not None for row in rows]


# --- GET /conversations -----------------------------------------------------------------------


async def test_conversations_are_listed_latest_message_first(client, tenant):
    first = await text_in(client, tenant, "+14155550181", "first")
    second = await text_in(client, tenant, "+14155550182", "second")
    contact = (await (await get(client, tenant, CONVERSATIONS)).get_json())["conversations"][1][
        "contact_id"
    ]
    await send_message(client, tenant, contact, "a reply to the first, which is now the latest")

    response = await get(client, tenant, CONVERSATIONS)

    assert response.status_code == 200
    body = await response.get_json()
    assert (body["status"], body["total"], body["limit"], body["offset"], body["has_more"]) == (
        "success",
        2,
        50,
        0,
        False,
    )
    assert [c["id"] for c in body["conversations"]] == [first, second]
    latest = body["conversations"][0]
    assert set(latest) == {
        "id",
        "contact_id",
        "last_message_at",
        "last_message_preview",
        "unread_count",
    }
    assert latest["last_message_preview"] == "a reply to the first, which is now the latest"
    assert latest["unread_count"] == 1 and latest["last_message_at"].endswith("Z")


async def test_conversations_filter_by_contact_and_unread(client, tenant):
    unread = await text_in(client, tenant, "+14155550183", "unread")
    contact = await add_contact(client, tenant, phone="+14155550184")
    only_outbound = (await send_message(client, tenant, contact, "hello"))["conversation_id"]

    by_contact = await (
        await get(client, tenant, f"{CONVERSATIONS}?contact_id={contact}")
    ).get_json()
    assert [c["id"] for c in by_contact["conversations"]] == [only_outbound]
    assert by_contact["total"] == 1
    with_unread = await (await get(client, tenant, f"{CONVERSATIONS}?unread=true")).get_json()
    assert [c["id"] for c in with_unread["conversations"]] == [unread]
    everything = await (await get(client, tenant, f"{CONVERSATIONS}?unread=false")).get_json()
    assert everything["total"] == 2


async def test_conversations_page_by_limit_and_offset(client, tenant):
    for index in range(3):
        await text_in(client, tenant, f"+1415555019{index}", f"text {index}")
    body = await (await get(client, tenant, f"{CONVERSATIONS}?limit=2&offset=1")).get_json()
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (3, 2, 1, False)
    assert [c["last_message_preview"] for c in body["conversations"]] == ["text 1", "text 0"]
    body = await (await get(client, tenant, f"{CONVERSATIONS}?limit=1")).get_json()
    assert body["has_more"] is True


@pytest.mark.parametrize(
    "query",
    [
        "limit=101",
        "limit=0",
        "limit=-1",
        "limit=abc",
        "offset=-1",
        "offset=x",
        "unread=maybe",
        "unread=1",
    ],
)
async def test_conversations_bad_query_is_400(client, tenant, query):
    await expect_error(
        await get(client, tenant, f"{CONVERSATIONS}?{query}"), 400, "validation_error"
    )


async def test_conversations_contact_filter_not_uuid_is_400(client, tenant):
    await expect_error(
        await get(client, tenant, f"{CONVERSATIONS}?contact_id=nope"), 400, "invalid_uuid"
    )


async def test_conversations_of_another_sub_account_are_not_listed(client, tenant, tenant_second):
    await text_in(client, tenant_second, "+14155550185", "not yours")
    body = await (await get(client, tenant, CONVERSATIONS)).get_json()
    assert (body["conversations"], body["total"]) == ([], 0)


async def test_conversations_without_a_key_is_401(client, tenant):
    response = await client.get(CONVERSATIONS)
    assert response.status_code == 401
    response = await client.get(CONVERSATIONS, headers=tenant.organisation.headers)
    assert response.status_code == 401


# --- GET /conversations/{id}/messages ---------------------------------------------------------


async def test_conversation_messages_are_newest_first_with_direction_and_status(client, tenant):
    conversation = await text_in(client, tenant, "+14155550186", "question")
    contact = (await (await get(client, tenant, CONVERSATIONS)).get_json())["conversations"][0][
        "contact_id"
    ]
    await send_message(client, tenant, contact, "answer")

    body = await (await get(client, tenant, f"{CONVERSATIONS}/{conversation}/messages")).get_json()

    assert (body["status"], body["total"], body["has_more"]) == ("success", 2, False)
    reply, question = body["messages"]
    assert set(reply) == MESSAGE_FIELDS
    assert (reply["content"], reply["direction"], reply["delivery_status"]) == (
        "answer",
        "outbound",
        "sent",
    )
    assert (question["content"], question["direction"], question["delivery_status"]) == (
        "question",
        "inbound",
        "received",
    )
    assert reply["conversation_id"] == question["conversation_id"] == conversation
    page = await (
        await get(client, tenant, f"{CONVERSATIONS}/{conversation}/messages?limit=1&offset=1")
    ).get_json()
    assert [m["content"] for m in page["messages"]] == ["question"]


async def test_conversation_messages_errors(client, tenant, tenant_second):
    conversation = await text_in(client, tenant, "+14155550187", "x")
    await expect_error(
        await get(client, tenant, f"{CONVERSATIONS}/nope/messages"), 400, "invalid_uuid"
    )
    await expect_error(
        await get(client, tenant, f"{CONVERSATIONS}/{uuid.uuid4()}/messages"), 404, "not_found"
    )
    await expect_error(
        await get(client, tenant_second, f"{CONVERSATIONS}/{conversation}/messages"),
        404,
        "not_found",
    )
    await expect_error(
        await get(client, tenant, f"{CONVERSATIONS}/{conversation}/messages?limit=101"),
        400,
        "validation_error",
    )


# --- PATCH /conversations/{id} ----------------------------------------------------------------


async def test_marking_a_conversation_read_reads_every_inbound_message(client, pool, tenant):
    conversation = await text_in(client, tenant, "+14155550188", "one")
    await text_in(client, tenant, "+14155550188", "two")

    response = await client.patch(
        f"{CONVERSATIONS}/{conversation}", json={"unread": False}, headers=tenant.headers
    )

    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success"
    assert (body["conversation"]["id"], body["conversation"]["unread_count"]) == (conversation, 0)
    assert await read_states(pool, tenant) == [True, True]
    listed = await (await get(client, tenant, f"{CONVERSATIONS}?unread=true")).get_json()
    assert listed["total"] == 0
    await text_in(client, tenant, "+14155550188", "three")
    [again] = (await (await get(client, tenant, CONVERSATIONS)).get_json())["conversations"]
    assert again["unread_count"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {"unread": True},
        {},
        {"unread": "false"},
        {"unread": 0},
        {"unread": None},
        {"unread": False, "other": 1},
        [],
        None,
    ],
)
async def test_marking_read_with_a_bad_body_is_400_and_reads_nothing(client, pool, tenant, body):
    conversation = await text_in(client, tenant, "+14155550189", "unread")
    response = await client.patch(
        f"{CONVERSATIONS}/{conversation}", json=body, headers=tenant.headers
    )
    await expect_error(response, 400, "validation_error")
    assert await read_states(pool, tenant) == [False]


async def test_marking_read_errors(client, pool, tenant, tenant_second):
    conversation = await text_in(client, tenant, "+14155550190", "x")
    await expect_error(
        await client.patch(f"{CONVERSATIONS}/nope", json={"unread": False}, headers=tenant.headers),
        400,
        "invalid_uuid",
    )
    await expect_error(
        await client.patch(
            f"{CONVERSATIONS}/{uuid.uuid4()}", json={"unread": False}, headers=tenant.headers
        ),
        404,
        "not_found",
    )
    await expect_error(
        await client.patch(
            f"{CONVERSATIONS}/{conversation}", json={"unread": False}, headers=tenant_second.headers
        ),
        404,
        "not_found",
    )
    assert await read_states(pool, tenant) == [False]
    response = await client.patch(f"{CONVERSATIONS}/{conversation}", json={"unread": False})
    assert response.status_code == 401


async def test_openapi_documents_the_conversation_and_twilio_routes(client):
    spec = await (await client.get("/openapi.json")).get_json()
    paths = spec["paths"]
    assert set(paths[CONVERSATIONS]) >= {"get"}
    assert set(paths[f"{CONVERSATIONS}/{{conversation_id}}"]) >= {"patch"}
    assert set(paths[f"{CONVERSATIONS}/{{conversation_id}}/messages"]) >= {"get"}
    for webhook in ("sms", "status"):
        assert "post" in paths[f"/webhooks/providers/twilio/{webhook}"]
    listed = paths[CONVERSATIONS]["get"]
    assert {"limit", "offset"} <= {p["name"] for p in listed["parameters"]}
    assert {"200", "400", "401"} <= set(listed["responses"])
    assert {"200", "400", "404"} <= set(
        paths[f"{CONVERSATIONS}/{{conversation_id}}"]["patch"]["responses"]
    )
    sent = spec["components"]["schemas"]["SentMessage"]["properties"]
    assert {"direction", "delivery_status", "provider_message_id"} <= set(sent)
