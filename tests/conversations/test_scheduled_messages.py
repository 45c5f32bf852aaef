"""Scheduled messages (CONTRACT 10 `send_at`, 10a): POST /contacts/{id}/messages with send_at
keeps the message `scheduled` in the conversation; the real worker sends and charges it once at
its time under the rules of that moment; POST /messages/{id}/cancel cancels it before."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from api.conversations.service import MESSAGE_SEND_WORK
from api.conversations.tasks import send_scheduled_message
from tenancy.clock import utcnow
from tenancy.due import DueWork
from tests.factories import SMS_PRICE, add_contact, credit
from tests.helpers import (
    balance,
    due_rows,
    expect_error,
    set_email_config,
    snapshot,
    tenant_sql,
)

BASE = "/webhooks/inbound"
PHONE = "+14155550161"


def messages_url(contact_id: str) -> str:
    return f"{BASE}/contacts/{contact_id}/messages"


def at(seconds: float) -> str:
    return (utcnow() + timedelta(seconds=seconds)).isoformat()


async def schedule(client: Any, tenant: Any, contact_id: str, send_at: str, **body: Any) -> Any:
    body = {"message_type": "sms", "content": "See you at 10", "send_at": send_at, **body}
    return await client.post(messages_url(contact_id), json=body, headers=tenant.headers)


async def scheduled(client: Any, tenant: Any, contact_id: str, send_at: str, **body: Any) -> Any:
    response = await schedule(client, tenant, contact_id, send_at, **body)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return (await response.get_json())["message"]


async def thread(client: Any, tenant: Any, message: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of the message's conversation, as GET /conversations/{id}/messages shows."""
    path = f"{BASE}/conversations/{message['conversation_id']}/messages"
    response = await client.get(path, headers=tenant.headers)
    return (await response.get_json())["messages"]  # type: ignore[no-any-return]


async def cancel(client: Any, tenant: Any, message_id: str) -> Any:
    return await client.post(f"{BASE}/messages/{message_id}/cancel", headers=tenant.headers)


async def stored(pool: Any, tenant: Any, message_id: str) -> Any:
    (row,) = await tenant_sql(
        pool,
        tenant,
        "SELECT status, error, send_at, updated_at FROM messages WHERE id = $1",
        uuid.UUID(message_id),
    )
    return row


async def settled(pool: Any, tenant: Any, message_id: str, send_at: str) -> Any:
    """The message once it left `scheduled` (a generous bound, not a timing); never before
    its send_at."""
    due = datetime.fromisoformat(send_at)
    async with asyncio.timeout(30):
        while True:
            row = await stored(pool, tenant, message_id)
            if utcnow() < due:
                assert row["status"] == "scheduled", row
            if row["status"] not in ("scheduled", "queued"):
                return row
            await asyncio.sleep(0.05)


async def charges(pool: Any, tenant: Any, message_id: str) -> list[Any]:
    return await tenant_sql(
        pool,
        tenant,
        "SELECT amount, status FROM wallet_transactions WHERE reference_id = $1 "
        "ORDER BY created_at",
        uuid.UUID(message_id),
    )


async def bring_forward(pool: Any, tenant: Any, message_id: str) -> None:
    """The message due a second ago, its due-work row left where it was (so only the runs the
    test makes send it)."""
    await tenant_sql(
        pool,
        tenant,
        "UPDATE messages SET send_at = now() - interval '1 second' WHERE id = $1",
        uuid.UUID(message_id),
    )


def same_moment(shown: str, sent: str) -> bool:
    """Times are shown to the millisecond."""
    gap = datetime.fromisoformat(shown) - datetime.fromisoformat(sent)
    return abs(gap) < timedelta(milliseconds=1)


def run_of(tenant: Any, message_id: str) -> DueWork:
    return DueWork(
        uuid.uuid4(),
        tenant.id,
        tenant.schema,
        MESSAGE_SEND_WORK,
        uuid.UUID(message_id),
        utcnow(),
        1,
        1,
    )


async def priced(client: Any, tenant: Any, amount: float = 1) -> str:
    await credit(client, tenant, amount)
    return await add_contact(client, tenant, phone=PHONE)


# --- scheduling and sending -------------------------------------------------------------------


async def test_scheduled_sms_is_kept_scheduled_then_sent_and_charged_once_at_its_time(
    client, pool, tenant_priced, worker
):
    tenant = tenant_priced
    contact_id = await priced(client, tenant)
    send_at = at(2)

    message = await scheduled(client, tenant, contact_id, send_at)

    assert (message["delivery_status"], message["status"]) == ("scheduled", "scheduled")
    assert same_moment(message["send_at"], send_at)
    assert message["provider_message_id"] is None and message["error"] is None
    (shown,) = await thread(client, tenant, message)
    assert (shown["id"], shown["delivery_status"]) == (message["id"], "scheduled")
    assert await balance(pool, tenant) == Decimal("1")

    row = await settled(pool, tenant, message["id"], send_at)

    assert row["status"] == "sent" and row["updated_at"] >= datetime.fromisoformat(send_at)
    assert await balance(pool, tenant) == Decimal("1") - SMS_PRICE
    assert [(c["amount"], c["status"]) for c in await charges(pool, tenant, message["id"])] == [
        (-SMS_PRICE, "posted")
    ]
    (shown,) = await thread(client, tenant, message)
    assert shown["delivery_status"] == "sent" and shown["provider_message_id"].startswith("SM")
    assert await due_rows(pool, [uuid.UUID(message["id"])]) == []


async def test_scheduled_email_arrives_once_with_its_message_id(
    client, pool, tenant_priced, mailbox, worker
):
    tenant = tenant_priced
    await credit(client, tenant, 1)
    address = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    contact_id = await add_contact(client, tenant, email=address)
    send_at = at(1)

    message = await scheduled(
        client, tenant, contact_id, send_at, message_type="email", subject="Later"
    )
    row = await settled(pool, tenant, message["id"], send_at)

    assert row["status"] == "sent"
    (received,) = mailbox.to(address)
    assert received["Subject"] == "Later"
    assert received["Message-ID"] == f"<{message['id']}@switchboard>"


# --- the rules at send time -------------------------------------------------------------------


async def test_sms_consent_revoked_meanwhile_fails_contact_opted_out_uncharged(
    client, pool, tenant_priced, worker
):
    tenant = tenant_priced
    contact_id = await priced(client, tenant)
    send_at = at(1.5)
    message = await scheduled(client, tenant, contact_id, send_at)
    response = await client.put(
        f"{BASE}/contacts/{contact_id}/consent",
        json={"channel": "sms", "status": "revoked"},
        headers=tenant.headers,
    )
    assert response.status_code == 200

    row = await settled(pool, tenant, message["id"], send_at)

    assert (row["status"], row["error"]) == ("failed", "contact_opted_out")
    assert await balance(pool, tenant) == Decimal("1")
    assert await charges(pool, tenant, message["id"]) == []


async def test_insufficient_funds_at_send_time_fails_uncharged(client, pool, tenant_priced, worker):
    tenant = tenant_priced
    contact_id = await add_contact(client, tenant, phone=PHONE)
    send_at = at(1)
    message = await scheduled(client, tenant, contact_id, send_at)

    row = await settled(pool, tenant, message["id"], send_at)

    assert (row["status"], row["error"]) == ("failed", "insufficient_funds")
    assert await balance(pool, tenant) == Decimal("0")
    assert [c["status"] for c in await charges(pool, tenant, message["id"])] == ["declined"]


async def test_a_contact_who_revoked_sms_already_is_409_and_nothing_is_written(
    client, pool, tenant
):
    contact_id = await add_contact(client, tenant, phone=PHONE)
    await client.put(
        f"{BASE}/contacts/{contact_id}/consent",
        json={"channel": "sms", "status": "revoked"},
        headers=tenant.headers,
    )
    before = await snapshot(pool, tenant)

    await expect_error(await schedule(client, tenant, contact_id, at(60)), 409, "contact_opted_out")

    assert await snapshot(pool, tenant) == before


# --- exactly once -----------------------------------------------------------------------------


async def test_a_run_repeated_sends_once_and_charges_once(client, pool, tenant_priced):
    tenant = tenant_priced
    contact_id = await priced(client, tenant)
    message = await scheduled(client, tenant, contact_id, at(3600))
    ctx = {"db": pool}

    # Not yet due: the run waits for send_at and sends nothing.
    again = await send_scheduled_message(ctx, run_of(tenant, message["id"]))
    assert again is not None and same_moment(again.isoformat(), message["send_at"])
    assert (await stored(pool, tenant, message["id"]))["status"] == "scheduled"
    await bring_forward(pool, tenant, message["id"])
    assert await send_scheduled_message(ctx, run_of(tenant, message["id"])) is None
    assert await send_scheduled_message(ctx, run_of(tenant, message["id"])) is None

    assert (await stored(pool, tenant, message["id"]))["status"] == "sent"
    assert len(await charges(pool, tenant, message["id"])) == 1
    assert await balance(pool, tenant) == Decimal("1") - SMS_PRICE


async def test_a_run_killed_mid_send_is_sent_once_by_the_next_run(
    client, pool, tenant_priced, gated_sink
):
    # An SMTP server that holds every message unanswered until opened, then refuses the held
    # ones (451) and accepts the rest.
    held_sink = gated_sink
    held_sink.accept_first = 0
    tenant = tenant_priced
    await set_email_config(
        pool, tenant.organisation.id, held_sink.host, held_sink.port, "agency@example.com"
    )
    await credit(client, tenant, 1)
    address = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    contact_id = await add_contact(client, tenant, email=address)
    message = await scheduled(
        client, tenant, contact_id, at(3600), message_type="email", subject="Later"
    )
    await bring_forward(pool, tenant, message["id"])
    ctx = {"db": pool}

    # Given: a run charged the message and is mid-send when its worker goes away.
    first = asyncio.create_task(send_scheduled_message(ctx, run_of(tenant, message["id"])))
    async with asyncio.timeout(20):
        while True:
            if held_sink.held >= 1:
                break
            await asyncio.sleep(0.02)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    row = await stored(pool, tenant, message["id"])
    assert row["status"] == "queued" and len(await charges(pool, tenant, message["id"])) == 1
    held_sink.opened.set()

    # When: the next run takes the work.
    assert await send_scheduled_message(ctx, run_of(tenant, message["id"])) is None

    # Then: the provider accepted it once, with the message's own id, charged once.
    (received,) = held_sink.to(address)
    assert received["Message-ID"] == f"<{message['id']}@switchboard>"
    assert (await stored(pool, tenant, message["id"]))["status"] == "sent"
    assert len(await charges(pool, tenant, message["id"])) == 1
    assert await balance(pool, tenant) == Decimal("1") - Decimal("0.05")


# --- cancel -----------------------------------------------------------------------------------


async def test_cancel_before_its_time_is_200_and_it_is_never_sent(
    client, pool, tenant_priced, worker
):
    tenant = tenant_priced
    contact_id = await priced(client, tenant)
    send_at = at(1.5)
    message = await scheduled(client, tenant, contact_id, send_at)

    response = await cancel(client, tenant, message["id"])

    assert response.status_code == 200
    cancelled = (await response.get_json())["message"]
    assert (cancelled["id"], cancelled["delivery_status"]) == (message["id"], "cancelled")
    assert await due_rows(pool, [uuid.UUID(message["id"])]) == []
    # A run queued before the cancel finds it cancelled.
    assert await send_scheduled_message({"db": pool}, run_of(tenant, message["id"])) is None
    await asyncio.sleep(max(0.0, (datetime.fromisoformat(send_at) - utcnow()).total_seconds()) + 1)
    assert (await stored(pool, tenant, message["id"]))["status"] == "cancelled"
    assert await balance(pool, tenant) == Decimal("1")
    await expect_error(await cancel(client, tenant, message["id"]), 409, "not_cancellable")


async def test_cancel_once_sent_is_409_not_cancellable(client, pool, tenant):
    contact_id = await add_contact(client, tenant, phone=PHONE)
    response = await client.post(
        messages_url(contact_id),
        json={"message_type": "sms", "content": "now"},
        headers=tenant.headers,
    )
    message = (await response.get_json())["message"]
    before = await snapshot(pool, tenant)

    await expect_error(await cancel(client, tenant, message["id"]), 409, "not_cancellable")

    assert await snapshot(pool, tenant) == before


async def test_cancel_of_a_missing_or_malformed_id_is_404_or_400(client, tenant):
    await expect_error(await cancel(client, tenant, str(uuid.uuid4())), 404, "not_found")
    await expect_error(await cancel(client, tenant, "not-a-uuid"), 400, "invalid_uuid")


async def test_another_sub_accounts_message_is_404_and_unchanged(
    client, pool, tenant, tenant_second
):
    contact_id = await add_contact(client, tenant_second, phone=PHONE)
    message = await scheduled(client, tenant_second, contact_id, at(3600))
    before = await snapshot(pool, tenant_second)

    await expect_error(await cancel(client, tenant, message["id"]), 404, "not_found")

    assert await snapshot(pool, tenant_second) == before


# --- bad send_at ------------------------------------------------------------------------------


# Times scheduled work refuses (CONTRACT 10): past, without a timezone, more than 365 days ahead
# (named: test ids must not depend on the clock), malformed, not a string, empty.
BAD_TIMES = [
    "2020-01-01T10:00:00Z",
    "2030-01-01T10:00:00",
    "in 366 days",
    "tomorrow at ten",
    "2026-13-45T99:00:00Z",
    "2026-02-30T10:00:00Z",
    1767225600,
    "",
]


def bad_time(value: Any) -> Any:
    return at(366 * 24 * 3600) if value == "in 366 days" else value


@pytest.mark.parametrize("send_at", BAD_TIMES)
async def test_bad_send_at_is_400_naming_it_and_nothing_is_written(client, pool, tenant, send_at):
    contact_id = await add_contact(client, tenant, phone=PHONE)
    before = await snapshot(pool, tenant)

    body = await expect_error(
        await schedule(client, tenant, contact_id, bad_time(send_at)), 400, "validation_error"
    )

    assert "send_at" in [detail["field"] for detail in body["error"]["details"]], body
    assert await snapshot(pool, tenant) == before
