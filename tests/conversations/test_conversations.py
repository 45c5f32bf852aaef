"""POST /contacts/{id}/messages, get-contact-messages and the sandbox inbound-SMS webhook."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

from api.conversations.signing import HEADER, sign
from tenancy.db import tenant_transaction
from tenancy.embedded import free_port
from tests.factories import EMAIL_PRICE, SMS_PRICE, add_contact, credit
from tests.helpers import balance, contact_email, error_code

HISTORY = "/functions/v1/crm-api/get-contact-messages"


def messages_url(contact_id: str) -> str:
    return f"/webhooks/inbound/contacts/{contact_id}/messages"


async def send(client, tenant, contact_id, **body):
    return await client.post(messages_url(contact_id), json=body, headers=tenant.headers)


async def history(client, tenant, contact_id, query=""):
    return await client.get(f"{HISTORY}/{contact_id}{query}", headers=tenant.headers)


async def inbound(client, sub_account_id, body: dict, signature: str | None = None):
    raw = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", HEADER: signature or sign(sub_account_id, raw)}
    return await client.post(
        f"/webhooks/providers/sandbox/sms/{sub_account_id}", data=raw, headers=headers
    )


# --- POST /contacts/{id}/messages -------------------------------------------------------------


async def test_send_email_is_201_delivered_charged_and_kept(client, pool, tenant_priced, mailbox):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    contact = await add_contact(client, tenant)

    response = await send(
        client, tenant, contact, message_type="email", content="Hello there", subject="Hi"
    )

    assert response.status_code == 201
    message = (await response.get_json())["message"]
    assert (message["message_type"], message["status"], message["sender_type"]) == (
        "email",
        "sent",
        "agent",
    )
    assert message["contact_id"] == contact and message["subject"] == "Hi"
    (received,) = mailbox.to(await contact_email(pool, tenant, contact))
    assert received["Subject"] == "Hi"
    assert received["Message-ID"] == f"<{message['id']}@switchboard>"
    assert await balance(pool, tenant) == Decimal("1") - EMAIL_PRICE


async def test_send_sms_is_201_and_charged_the_sms_price(client, pool, tenant_priced):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    contact = await add_contact(client, tenant, phone="+14155550142")
    response = await send(client, tenant, contact, message_type="sms", content="On my way")
    assert response.status_code == 201
    assert (await response.get_json())["message"]["status"] == "sent"
    assert await balance(pool, tenant) == Decimal("1") - SMS_PRICE


async def test_send_beyond_the_balance_is_402_and_nothing_is_sent(
    client, pool, tenant_priced, mailbox
):
    tenant = tenant_priced
    contact = await add_contact(client, tenant)
    response = await send(client, tenant, contact, message_type="email", content="x", subject="s")
    assert response.status_code == 402
    assert await error_code(response) == "insufficient_funds"
    assert mailbox.to(await contact_email(pool, tenant, contact)) == []
    assert (await history(client, tenant, contact)).status_code == 404
    async with tenant_transaction(pool, tenant.schema) as conn:
        declined = await conn.fetchval(
            "SELECT count(*) FROM wallet_transactions WHERE status = 'declined'"
        )
    assert declined == 1


async def test_send_sms_refused_by_provider_is_502_refunded_and_recorded_failed(
    client, pool, tenant_priced
):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    contact = await add_contact(client, tenant, phone="+14155550199")
    response = await send(client, tenant, contact, message_type="sms", content="x")
    assert response.status_code == 502
    assert await error_code(response) == "provider_error"
    assert await balance(pool, tenant) == Decimal("1")
    async with tenant_transaction(pool, tenant.schema) as conn:
        status = await conn.fetchval("SELECT status FROM messages")
    assert status == "failed"


async def test_send_email_with_the_server_down_is_502(client, pool, tenant):
    await pool.execute(
        "INSERT INTO control.email_configs (organisation_id, host, port, from_address) "
        "VALUES ($1, '127.0.0.1', $2, 'x@example.com')",
        tenant.organisation.id,
        free_port(),
    )
    contact = await add_contact(client, tenant)
    response = await send(client, tenant, contact, message_type="email", content="x")
    assert response.status_code == 502
    assert await error_code(response) == "email_delivery_failed"


async def test_send_email_to_a_contact_without_email_is_400(client, tenant):
    contact = await add_contact(client, tenant, phone="+14155550143")
    response = await send(client, tenant, contact, message_type="email", content="x")
    assert response.status_code == 400
    assert await error_code(response) == "contact_has_no_email"


async def test_send_sms_to_a_contact_without_phone_is_400(client, tenant):
    contact = await add_contact(client, tenant)
    response = await send(client, tenant, contact, message_type="sms", content="x")
    assert response.status_code == 400
    assert await error_code(response) == "contact_has_no_phone"


async def test_send_invalid_bodies_are_400(client, tenant):
    contact = await add_contact(client, tenant)
    for body in (
        {"message_type": "fax", "content": "x"},
        {"message_type": "sms"},
        {"message_type": "email", "content": "   "},
        {"content": "x"},
        {"message_type": "sms", "content": 5},
    ):
        response = await client.post(messages_url(contact), json=body, headers=tenant.headers)
        assert response.status_code == 400, body


async def test_send_to_id_not_uuid_is_400(client, tenant):
    response = await send(client, tenant, "abc", message_type="sms", content="x")
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_send_to_unknown_contact_is_404(client, tenant):
    response = await send(client, tenant, str(uuid.uuid4()), message_type="sms", content="x")
    assert response.status_code == 404


async def test_send_to_contact_of_another_sub_account_is_404(
    client, pool, tenant, tenant_second, mailbox
):
    foreign = await add_contact(client, tenant_second)
    response = await send(client, tenant, foreign, message_type="email", content="x")
    assert response.status_code == 404
    assert mailbox.to(await contact_email(pool, tenant_second, foreign)) == []


async def test_send_without_key_is_401(client, tenant):
    contact = await add_contact(client, tenant)
    response = await client.post(
        messages_url(contact), json={"message_type": "sms", "content": "x"}
    )
    assert response.status_code == 401


# --- get-contact-messages ---------------------------------------------------------------------


async def _conversation(client, tenant, count):
    contact = await add_contact(
        client,
        tenant,
        email=f"c-{uuid.uuid4().hex[:8]}@example.com",
        phone=None,
        first_name="Grace",
    )
    for index in range(count):
        response = await send(
            client, tenant, contact, message_type="email", content=f"message {index}", subject="s"
        )
        assert response.status_code == 201
    return contact


async def test_history_is_newest_first_with_the_spec_shape(client, tenant):
    contact = await _conversation(client, tenant, 3)
    response = await history(client, tenant, contact)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["success"] is True
    assert body["contact_id"] == contact
    assert body["contact"]["name"] == "Grace"
    assert set(body["contact"]) == {"name", "email", "phone"}
    assert (body["total"], body["limit"], body["offset"]) == (3, 50, 0)
    assert [m["content"] for m in body["messages"]] == ["message 2", "message 1", "message 0"]
    assert set(body["messages"][0]) == {"id", "content", "sender_type", "message_type", "timestamp"}
    assert body["messages"][0]["timestamp"].endswith("Z")
    uuid.UUID(body["conversation_id"])


async def test_history_limit_and_offset_page_through(client, tenant):
    contact = await _conversation(client, tenant, 3)
    body = await (await history(client, tenant, contact, "?limit=2&offset=1")).get_json()
    assert (body["total"], body["limit"], body["offset"]) == (3, 2, 1)
    assert [m["content"] for m in body["messages"]] == ["message 1", "message 0"]
    body = await (await history(client, tenant, contact, "?limit=200")).get_json()
    assert body["limit"] == 200 and len(body["messages"]) == 3


async def test_history_bad_limit_or_offset_is_400(client, tenant):
    contact = await _conversation(client, tenant, 1)
    for query in ("?limit=201", "?limit=0", "?limit=-1", "?limit=abc", "?offset=-1", "?offset=x"):
        response = await history(client, tenant, contact, query)
        assert response.status_code == 400, query
        body = await response.get_json()
        assert body["success"] is False and body["error"]["code"] == "validation_error"


async def test_history_of_contact_without_conversation_is_404(client, tenant):
    contact = await add_contact(client, tenant)
    response = await history(client, tenant, contact)
    assert response.status_code == 404
    assert (await response.get_json())["success"] is False


async def test_history_of_unknown_contact_is_404(client, tenant):
    response = await history(client, tenant, str(uuid.uuid4()))
    assert response.status_code == 404


async def test_history_contact_id_not_uuid_is_400(client, tenant):
    response = await history(client, tenant, "nope")
    assert response.status_code == 400
    assert (await response.get_json())["error"]["code"] == "invalid_uuid"


async def test_history_of_contact_of_another_sub_account_is_404(client, tenant, tenant_second):
    foreign = await _conversation(client, tenant_second, 1)
    response = await history(client, tenant, foreign)
    assert response.status_code == 404


async def test_history_with_agency_key_or_none_is_401(client, tenant):
    contact = await _conversation(client, tenant, 1)
    response = await client.get(f"{HISTORY}/{contact}", headers=tenant.organisation.headers)
    assert response.status_code == 401
    response = await client.get(f"{HISTORY}/{contact}")
    assert response.status_code == 401


# --- inbound SMS ------------------------------------------------------------------------------


async def test_inbound_sms_joins_the_senders_conversation(client, tenant):
    contact = await add_contact(client, tenant, phone="+14155550144")
    response = await inbound(
        client,
        tenant.id,
        {"from": "+14155550144", "to": "+14155550101", "body": "Yes please", "message_id": "SM1"},
    )
    assert response.status_code == 200
    body = await response.get_json()
    assert body["contact_id"] == contact and body["duplicate"] is False
    (message,) = (await (await history(client, tenant, contact)).get_json())["messages"]
    assert (message["content"], message["sender_type"], message["message_type"]) == (
        "Yes please",
        "contact",
        "sms",
    )


async def test_inbound_sms_retried_by_the_provider_is_kept_once(client, tenant):
    contact = await add_contact(client, tenant, phone="+14155550145")
    payload = {"from": "+14155550145", "body": "Hi", "message_id": "SM-retry"}
    first = await (await inbound(client, tenant.id, payload)).get_json()
    second = await (await inbound(client, tenant.id, payload)).get_json()
    assert second["duplicate"] is True and second["message_id"] == first["message_id"]
    assert (await (await history(client, tenant, contact)).get_json())["total"] == 1


async def test_inbound_sms_from_an_unknown_number_creates_the_contact(client, tenant):
    response = await inbound(
        client, tenant.id, {"from": "+14155550146", "body": "Who is this?", "message_id": "SM2"}
    )
    assert response.status_code == 200
    contact = (await response.get_json())["contact_id"]
    body = await (await history(client, tenant, contact)).get_json()
    assert body["contact"]["phone"] == "+14155550146"


async def test_inbound_stop_revokes_sms_consent(client, pool, tenant):
    contact = await add_contact(client, tenant, phone="+14155550147")
    await inbound(
        client, tenant.id, {"from": "+14155550147", "body": " STOP ", "message_id": "SM3"}
    )
    async with tenant_transaction(pool, tenant.schema) as conn:
        rows = await conn.fetch(
            "SELECT channel, status, source FROM contact_consents WHERE contact_id = $1",
            uuid.UUID(contact),
        )
    assert [tuple(row) for row in rows] == [("sms", "revoked", "inbound_keyword")]


async def test_inbound_sms_with_a_wrong_signature_is_401(client, tenant):
    response = await inbound(
        client,
        tenant.id,
        {"from": "+14155550148", "body": "x", "message_id": "SM4"},
        signature="v1=00",
    )
    assert response.status_code == 401
    assert await error_code(response) == "invalid_signature"


async def test_inbound_sms_signed_for_another_sub_account_is_401(client, tenant, tenant_second):
    raw = json.dumps({"from": "+14155550149", "body": "x", "message_id": "SM5"}).encode()
    response = await client.post(
        f"/webhooks/providers/sandbox/sms/{tenant.id}",
        data=raw,
        headers={HEADER: sign(tenant_second.id, raw), "Content-Type": "application/json"},
    )
    assert response.status_code == 401


async def test_inbound_sms_invalid_body_is_400(client, tenant):
    for body in (
        {"from": "555", "body": "x", "message_id": "a"},
        {"body": "x"},
        {"from": "+14155550150", "body": 1, "message_id": "a"},
    ):
        response = await inbound(client, tenant.id, body)
        assert response.status_code == 400, body


async def test_inbound_sms_for_unknown_sub_account_is_404(client):
    response = await inbound(
        client, uuid.uuid4(), {"from": "+14155550151", "body": "x", "message_id": "SM6"}
    )
    assert response.status_code == 404


async def test_inbound_sms_sub_account_not_uuid_is_400(client):
    response = await client.post("/webhooks/providers/sandbox/sms/xyz", json={})
    assert response.status_code == 400
