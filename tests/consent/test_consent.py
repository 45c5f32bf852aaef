"""Consent per contact and channel: GET/PUT, inbound keywords, unsubscribe links, the event,
and what it refuses (messages, calls) or skips (campaign recipients)."""

from __future__ import annotations

import asyncio
import json
import uuid
from decimal import Decimal

import pytest

from api.consent.service import apply_inbound_keyword
from tenancy.db import tenant_transaction
from tests.consent.conftest import consent_events
from tests.factories import (
    CONTACTS,
    EMAIL_PRICE,
    add_contact,
    credit,
    make_contact,
)
from tests.helpers import balance, contact_email, expect_error, tenant_sql

UNKNOWN = {"status": "unknown", "source": None, "updated_at": None}


def consent_url(contact_id: str) -> str:
    return f"{CONTACTS}/{contact_id}/consent"


async def put(client, tenant, contact_id, **body):
    return await client.put(consent_url(contact_id), json=body, headers=tenant.headers)


async def get(client, tenant, contact_id):
    return await client.get(consent_url(contact_id), headers=tenant.headers)


async def stored(pool, tenant):
    return await tenant_sql(
        pool,
        tenant,
        "SELECT contact_id, channel, status, source FROM contact_consents ORDER BY channel",
    )


# --- GET / PUT --------------------------------------------------------------------------------


async def test_get_of_a_contact_never_set_reads_unknown_on_every_channel(client, tenant):
    contact = await add_contact(client, tenant)
    response = await get(client, tenant, contact)
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "contact_id": contact,
        "consent": {"sms": UNKNOWN, "email": UNKNOWN, "call": UNKNOWN},
    }


async def test_put_revokes_one_channel_with_source_api_and_get_shows_it(client, pool, tenant):
    contact = await add_contact(client, tenant)
    response = await put(client, tenant, contact, channel="sms", status="revoked")
    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success" and body["contact_id"] == contact
    sms = body["consent"]["sms"]
    assert (sms["status"], sms["source"]) == ("revoked", "api")
    assert sms["updated_at"].endswith("Z")
    assert body["consent"]["email"] == UNKNOWN and body["consent"]["call"] == UNKNOWN
    assert await (await get(client, tenant, contact)).get_json() == body
    assert [tuple(row) for row in await stored(pool, tenant)] == [
        (uuid.UUID(contact), "sms", "revoked", "api")
    ]


async def test_put_grants_again_after_an_unsubscribe_and_records_the_source(client, tenant):
    contact = await add_contact(client, tenant)
    await put(client, tenant, contact, channel="email", status="revoked", source="unsubscribe_link")
    response = await put(client, tenant, contact, channel="email", status="granted")
    assert response.status_code == 200
    email = (await response.get_json())["consent"]["email"]
    assert (email["status"], email["source"]) == ("granted", "api")


@pytest.mark.parametrize(
    "body",
    [
        {"channel": "fax", "status": "revoked"},
        {"channel": "sms", "status": "unknown"},
        {"channel": "sms", "status": "maybe"},
        {"channel": "sms", "status": "revoked", "source": "carrier"},
        {"channel": "sms"},
        {"status": "granted"},
        {"channel": ["sms"], "status": "granted"},
        {},
    ],
)
async def test_put_with_a_bad_channel_status_or_source_is_400_and_writes_nothing(
    client, pool, tenant, body
):
    contact = await add_contact(client, tenant)
    response = await put(client, tenant, contact, **body)
    body = await expect_error(response, 400, "validation_error")
    assert body["error"]["details"]
    assert await stored(pool, tenant) == []


async def test_put_without_json_is_400(client, pool, tenant):
    contact = await add_contact(client, tenant)
    response = await client.put(
        consent_url(contact),
        data="channel=sms",
        headers={**tenant.headers, "Content-Type": "text/plain"},
    )
    assert response.status_code == 400
    assert (await response.get_json())["status"] == "error"
    assert await stored(pool, tenant) == []


@pytest.mark.parametrize("method", ["GET", "PUT"])
async def test_a_contact_id_that_is_not_a_uuid_is_400(client, tenant, method):
    response = await client.open(
        consent_url("nope"),
        method=method,
        headers=tenant.headers,
        json={"channel": "sms", "status": "revoked"},
    )
    await expect_error(response, 400, "invalid_uuid")


@pytest.mark.parametrize("method", ["GET", "PUT"])
async def test_a_missing_contact_is_404(client, pool, tenant, method):
    response = await client.open(
        consent_url(str(uuid.uuid4())),
        method=method,
        headers=tenant.headers,
        json={"channel": "sms", "status": "revoked"},
    )
    await expect_error(response, 404, "not_found")
    assert await stored(pool, tenant) == []


@pytest.mark.parametrize("method", ["GET", "PUT"])
async def test_another_sub_accounts_contact_is_404_and_unchanged(
    client, pool, tenant, tenant_second, method
):
    theirs = await add_contact(client, tenant_second)
    response = await client.open(
        consent_url(theirs),
        method=method,
        headers=tenant.headers,
        json={"channel": "sms", "status": "revoked"},
    )
    await expect_error(response, 404, "not_found")
    assert await stored(pool, tenant_second) == []


async def test_without_a_key_is_401(client, tenant):
    contact = await add_contact(client, tenant)
    response = await client.get(consent_url(contact))
    await expect_error(response, 401, "missing_api_key")


async def test_deleting_the_contact_deletes_its_consent(client, pool, tenant):
    contact = await add_contact(client, tenant)
    await put(client, tenant, contact, channel="call", status="revoked")
    assert (await client.delete(f"{CONTACTS}/{contact}", headers=tenant.headers)).status_code == 200
    assert await stored(pool, tenant) == []


# --- the event --------------------------------------------------------------------------------


async def test_a_change_fires_contact_consent_updated_once(client, pool, subscribed):
    tenant = subscribed
    contact = await add_contact(client, tenant)
    await put(client, tenant, contact, channel="sms", status="revoked")
    await put(client, tenant, contact, channel="sms", status="revoked")
    await put(client, tenant, contact, channel="sms", status="granted")
    await put(client, tenant, contact, channel="sms", status="granted", source="inbound_keyword")
    assert await consent_events(pool, tenant) == [
        {
            "sub_account_id": str(tenant.id),
            "contact_id": contact,
            "channel": "sms",
            "status": status,
            "source": source,
        }
        for status, source in (
            ("revoked", "api"),
            ("granted", "api"),
            ("granted", "inbound_keyword"),
        )
    ]


async def test_concurrent_identical_puts_store_one_row_and_fire_one_event(client, pool, subscribed):
    tenant = subscribed
    contact = await add_contact(client, tenant)
    answers = await asyncio.gather(
        *(put(client, tenant, contact, channel="email", status="revoked") for _ in range(8))
    )
    assert {answer.status_code for answer in answers} == {200}
    assert len(await stored(pool, tenant)) == 1
    assert len(await consent_events(pool, tenant)) == 1


async def test_the_same_status_and_source_again_changes_nothing(client, pool, tenant):
    contact = await add_contact(client, tenant)
    first = await (await put(client, tenant, contact, channel="sms", status="revoked")).get_json()
    again = await (await put(client, tenant, contact, channel="sms", status="revoked")).get_json()
    assert again == first


async def test_a_refused_request_fires_nothing(client, pool, subscribed):
    tenant = subscribed
    contact = await add_contact(client, tenant)
    await put(client, tenant, contact, channel="sms", status="nope")
    await client.put(
        consent_url(str(uuid.uuid4())),
        headers=tenant.headers,
        json={"channel": "sms", "status": "revoked"},
    )
    assert await consent_events(pool, tenant) == []


# --- inbound keywords -------------------------------------------------------------------------


async def keyword(pool, tenant, contact, body):
    async with tenant_transaction(pool, tenant.schema) as conn:
        await apply_inbound_keyword(conn, uuid.UUID(contact), body)


@pytest.mark.parametrize(
    "word", ["STOP", "stop", " StopAll ", "UNSUBSCRIBE", "cancel", "End", "QUIT\n"]
)
async def test_a_stop_keyword_alone_revokes_sms(client, pool, subscribed, word):
    tenant = subscribed
    contact = await add_contact(client, tenant)
    await keyword(pool, tenant, contact, word)
    sms = (await (await get(client, tenant, contact)).get_json())["consent"]["sms"]
    assert (sms["status"], sms["source"]) == ("revoked", "inbound_keyword")
    assert await consent_events(pool, tenant) == [
        {
            "sub_account_id": str(tenant.id),
            "contact_id": contact,
            "channel": "sms",
            "status": "revoked",
            "source": "inbound_keyword",
        }
    ]


@pytest.mark.parametrize("word", ["START", "unstop", " Start "])
async def test_start_or_unstop_grants_sms_after_a_stop(client, pool, tenant, word):
    contact = await add_contact(client, tenant)
    await keyword(pool, tenant, contact, "STOP")
    await keyword(pool, tenant, contact, word)
    sms = (await (await get(client, tenant, contact)).get_json())["consent"]["sms"]
    assert (sms["status"], sms["source"]) == ("granted", "inbound_keyword")


@pytest.mark.parametrize("text", ["please stop", "STOP!", "stop it", "", "Hello", "STO P"])
async def test_other_texts_change_nothing(client, pool, tenant, text):
    contact = await add_contact(client, tenant)
    await keyword(pool, tenant, contact, text)
    assert await stored(pool, tenant) == []


async def test_the_sandbox_inbound_sms_applies_keywords(client, pool, tenant):
    from api.conversations.signing import HEADER, sign

    async def inbound(body, message_id):
        raw = json.dumps({"from": "+14155550147", "body": body, "message_id": message_id}).encode()
        response = await client.post(
            f"/webhooks/providers/sandbox/sms/{tenant.id}",
            data=raw,
            headers={"Content-Type": "application/json", HEADER: sign(tenant.id, raw)},
        )
        assert response.status_code == 200
        return (await response.get_json())["contact_id"]

    contact = await inbound("Stop", "SM-consent-1")
    sms = (await (await get(client, tenant, contact)).get_json())["consent"]["sms"]
    assert sms["status"] == "revoked"
    await inbound("start", "SM-consent-2")
    sms = (await (await get(client, tenant, contact)).get_json())["consent"]["sms"]
    assert (sms["status"], sms["source"]) == ("granted", "inbound_keyword")


# --- one-to-one messages ----------------------------------------------------------------------


async def send(client, tenant, contact, message_type):
    return await client.post(
        f"{CONTACTS}/{contact}/messages",
        headers=tenant.headers,
        json={"message_type": message_type, "content": "Hello", "subject": "Hi"},
    )


@pytest.mark.parametrize("channel", ["sms", "email"])
async def test_a_message_to_a_revoked_channel_is_409_uncharged_unwritten_unsent(
    client, pool, tenant_priced, mailbox, channel
):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    contact = await make_contact(client, tenant, phone="+14155550149")
    await put(client, tenant, contact, channel=channel, status="revoked")

    await expect_error(await send(client, tenant, contact, channel), 409, "contact_opted_out")

    assert await balance(pool, tenant) == Decimal("1")
    assert await tenant_sql(pool, tenant, "SELECT id FROM messages") == []
    assert await tenant_sql(pool, tenant, "SELECT id FROM conversations") == []
    assert mailbox.to(await contact_email(pool, tenant, contact)) == []


async def test_revoking_one_channel_leaves_the_others_open(client, pool, tenant_priced, mailbox):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    contact = await make_contact(client, tenant, phone="+14155550150")
    await put(client, tenant, contact, channel="sms", status="revoked")
    assert (await send(client, tenant, contact, "email")).status_code == 201
    assert await balance(pool, tenant) == Decimal("1") - EMAIL_PRICE


async def test_a_channel_granted_again_can_be_messaged(client, pool, tenant_priced, mailbox):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    contact = await make_contact(client, tenant, phone="+14155550151")
    await put(client, tenant, contact, channel="email", status="revoked")
    await put(client, tenant, contact, channel="email", status="granted")
    assert (await send(client, tenant, contact, "email")).status_code == 201
    assert len(mailbox.to(await contact_email(pool, tenant, contact))) == 1


# --- the OpenAPI document ---------------------------------------------------------------------


def _resolve(spec, schema):
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


async def test_openapi_documents_both_consent_operations(client):
    spec = await (await client.get("/openapi.json")).get_json()
    path = spec["paths"]["/webhooks/inbound/contacts/{contact_id}/consent"]
    assert set(path["get"]["responses"]) >= {"200", "400", "404"}
    assert set(path["put"]["responses"]) >= {"200", "400", "404"}
    body = _resolve(spec, path["put"]["requestBody"]["content"]["application/json"]["schema"])
    assert set(body["required"]) == {"channel", "status"}
    assert body["properties"]["channel"]["enum"] == ["sms", "email", "call"]
    assert body["properties"]["status"]["enum"] == ["granted", "revoked"]
    answer = _resolve(
        spec, path["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    )
    assert set(answer["properties"]) == {"status", "contact_id", "consent"}
    for route, method in (
        ("/webhooks/inbound/contacts/{contact_id}/messages", "post"),
        ("/webhooks/inbound/contacts/{contact_id}/call", "post"),
    ):
        assert "409" in spec["paths"][route][method]["responses"], route
