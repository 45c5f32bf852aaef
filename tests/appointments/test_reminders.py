"""Appointment reminders (CONTRACT 10 `reminders`, 10a): sent once at start minus
minutes_before under POST /contacts/{id}/messages's rules, by the real worker; dropped by a
cancel, moved by a reschedule, never twice.

Slots are 5 minutes apart and reminders at least a minute before: to keep the tests fast, a
booked appointment's planned reminder times (and its due-work row) are brought forward to a
second or two from now, as the plan stands after booking."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest

from api.appointments import tasks as reminders_module
from api.appointments.tasks import APPOINTMENT_REMINDER, send_due_reminders
from tenancy.clock import iso, utcnow
from tenancy.db import tenant_transaction
from tenancy.due import DueWork, schedule_due
from tenancy.embedded import free_port
from tests.factories import (
    APPOINTMENTS,
    CONTACTS,
    EMAIL_PRICE,
    SMS_PRICE,
    book,
    create_calendar,
    create_contact,
    credit,
    free_slots,
    make_priced_tenant,
)
from tests.helpers import (
    TIMESTAMP,
    balance,
    stored_timestamps_off_format,
    tenant_sql,
    worker_process,
)

SMS = {
    "minutes_before": 1,
    "channel": "sms",
    "template": "Hi {{ contact.first_name }}, {{calendar.name}} at {{ appointment.start_local }}",
}
EMAIL = {
    "minutes_before": 2,
    "channel": "email",
    "subject": "Reminder: {{ calendar.name }}",
    "template": "See you at {{ appointment.start_local }}, {{ contact.name }}",
}


async def arrange(
    client: Any, agency: Any, reminders: list[dict[str, Any]], **contact: Any
) -> tuple[Any, dict[str, Any], str, list[dict[str, Any]]]:
    """A priced, credited tenant; a calendar (Europe/Berlin, all day, 5-minute slots, no
    notice) with these reminders; a contact; and the free slots from now on."""
    tenant = await make_priced_tenant(client, agency)
    await credit(client, tenant, 1)
    calendar = await create_calendar(
        client, tenant, name="Dental", timezone="Europe/Berlin", slot_minutes=5, reminders=reminders
    )
    contact.setdefault("first_name", "Ada")
    contact_id = await create_contact(client, tenant, **contact)
    today = utcnow().date()
    slots = await free_slots(
        client, tenant, calendar["id"], today.isoformat(), (today + timedelta(days=1)).isoformat()
    )
    return tenant, calendar, contact_id, slots


async def plan_of(pool: Any, tenant: Any, appointment_id: str) -> list[dict[str, Any]]:
    (row,) = await tenant_sql(
        pool, tenant, "SELECT reminders FROM appointments WHERE id = $1", uuid.UUID(appointment_id)
    )
    return list(row["reminders"])


async def bring_forward(pool: Any, tenant: Any, appointment_id: str, seconds: float = 1.0) -> None:
    """Every pending reminder of the appointment due `seconds` from now (its row too)."""
    at = utcnow() + timedelta(seconds=seconds)
    async with tenant_transaction(pool, tenant.schema) as conn:
        entries = await conn.fetchval(
            "SELECT reminders FROM appointments WHERE id = $1", uuid.UUID(appointment_id)
        )
        for entry in entries:
            if entry["status"] == "pending":
                entry["at"] = iso(at)
        await conn.execute(
            "UPDATE appointments SET reminders = $2 WHERE id = $1",
            uuid.UUID(appointment_id),
            entries,
        )
        await schedule_due(conn, tenant.id, APPOINTMENT_REMINDER, uuid.UUID(appointment_id), at)


async def settled(pool: Any, tenant: Any, appointment_id: str) -> list[dict[str, Any]]:
    """The plan once no entry is pending (a generous bound, not a timing)."""
    async with asyncio.timeout(30):
        while True:
            entries = await plan_of(pool, tenant, appointment_id)
            if all(entry["status"] != "pending" for entry in entries):
                return entries
            await asyncio.sleep(0.1)


async def outbound(pool: Any, tenant: Any, contact_id: str) -> list[Any]:
    return await tenant_sql(
        pool,
        tenant,
        "SELECT m.id, m.message_type, m.subject, m.content, m.status FROM messages AS m "
        "JOIN conversations AS v ON v.id = m.conversation_id "
        "WHERE v.contact_id = $1 AND m.direction = 'outbound' ORDER BY m.created_at",
        uuid.UUID(contact_id),
    )


async def due_rows(pool: Any, appointment_id: str) -> list[Any]:
    return list(
        await pool.fetch(
            "SELECT id FROM control.due_work WHERE kind = $1 AND ref_id = $2",
            APPOINTMENT_REMINDER,
            uuid.UUID(appointment_id),
        )
    )


def local(start: str) -> str:
    from zoneinfo import ZoneInfo

    instant = datetime.fromisoformat(start.replace("Z", "+00:00"))
    return instant.astimezone(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d %H:%M")


def run_of(tenant: Any, appointment_id: str) -> DueWork:
    return DueWork(
        uuid.uuid4(),
        tenant.id,
        tenant.schema,
        APPOINTMENT_REMINDER,
        uuid.UUID(appointment_id),
        utcnow(),
        1,
        1,
    )


async def test_sms_and_email_reminders_arrive_once_at_their_time(
    client, pool, agency, mailbox, worker
):
    tenant, calendar, contact_id, slots = await arrange(
        client,
        agency,
        [SMS, EMAIL],
        phone="+14155550149",
        email=f"ada-{uuid.uuid4().hex[:8]}@example.com",
        last_name="Lovelace",
    )
    # A slot far enough ahead that both reminders are still to come at booking.
    slot = slots[1]
    appointment = await book(client, tenant, calendar["id"], contact_id, slot["start"])
    plan = await plan_of(pool, tenant, appointment["id"])
    assert [e["status"] for e in plan] == ["pending", "pending"]
    assert all(TIMESTAMP.fullmatch(e["at"]) for e in plan), plan
    assert len(await due_rows(pool, appointment["id"])) == 1

    await bring_forward(pool, tenant, appointment["id"])
    entries = await settled(pool, tenant, appointment["id"])

    assert [e["status"] for e in entries] == ["sent", "sent"], entries
    assert all(TIMESTAMP.fullmatch(e["sent_at"]) for e in entries), entries
    assert await stored_timestamps_off_format(pool, tenant) == []
    by_type = {m["message_type"]: m for m in await outbound(pool, tenant, contact_id)}
    sms, email = by_type["sms"], by_type["email"]
    assert sms["message_type"] == "sms" and sms["status"] == "sent"
    assert sms["content"] == f"Hi Ada, Dental at {local(slot['start'])}"
    assert email["message_type"] == "email" and email["subject"] == "Reminder: Dental"
    (address,) = await tenant_sql(
        pool, tenant, "SELECT email FROM contacts WHERE id = $1", uuid.UUID(contact_id)
    )
    (received,) = mailbox.to(address["email"])
    assert received["Subject"] == "Reminder: Dental"
    assert f"See you at {local(slot['start'])}" in received.get_payload(decode=True).decode()
    assert await balance(pool, tenant) == Decimal("1") - SMS_PRICE - EMAIL_PRICE
    assert await due_rows(pool, appointment["id"]) == []


async def test_a_reminder_whose_time_passed_at_booking_is_not_sent(client, pool, agency):
    tenant, calendar, contact_id, slots = await arrange(
        client, agency, [{**SMS, "minutes_before": 120}], phone="+14155550148"
    )
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[0]["start"])

    (entry,) = await plan_of(pool, tenant, appointment["id"])
    assert (entry["status"], entry["reason"]) == ("skipped", "time_passed_at_booking")
    assert await due_rows(pool, appointment["id"]) == []
    assert await send_due_reminders({"db": pool}, run_of(tenant, appointment["id"])) is None
    assert await outbound(pool, tenant, contact_id) == []


async def test_cancel_drops_the_reminders(client, pool, agency):
    tenant, calendar, contact_id, slots = await arrange(client, agency, [SMS], phone="+14155550147")
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])
    await bring_forward(pool, tenant, appointment["id"], seconds=-1)

    response = await client.patch(
        f"{APPOINTMENTS}/{appointment['id']}", json={"status": "cancelled"}, headers=tenant.headers
    )
    assert response.status_code == 200

    assert await due_rows(pool, appointment["id"]) == []
    (entry,) = await plan_of(pool, tenant, appointment["id"])
    assert (entry["status"], entry["reason"]) == ("skipped", "appointment_cancelled")
    # A run that raced the cancel (queued before it) sends nothing.
    assert await send_due_reminders({"db": pool}, run_of(tenant, appointment["id"])) is None
    assert await outbound(pool, tenant, contact_id) == []
    assert await balance(pool, tenant) == Decimal("1")


async def test_reschedule_moves_the_reminders(client, pool, agency, worker):
    tenant, calendar, contact_id, slots = await arrange(client, agency, [SMS], phone="+14155550146")
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])
    (old,) = await plan_of(pool, tenant, appointment["id"])
    new_start = slots[3]["start"]

    response = await client.patch(
        f"{APPOINTMENTS}/{appointment['id']}", json={"start": new_start}, headers=tenant.headers
    )
    assert response.status_code == 200
    (moved,) = await plan_of(pool, tenant, appointment["id"])
    assert moved["message_id"] != old["message_id"]
    assert datetime.fromisoformat(moved["at"]) == (
        datetime.fromisoformat(new_start.replace("Z", "+00:00")) - timedelta(minutes=1)
    )

    await bring_forward(pool, tenant, appointment["id"])
    (entry,) = await settled(pool, tenant, appointment["id"])

    assert entry["status"] == "sent"
    (message,) = await outbound(pool, tenant, contact_id)
    assert str(message["id"]) == moved["message_id"]
    assert message["content"] == f"Hi Ada, Dental at {local(new_start)}"


async def test_consent_revoked_is_not_sent_nor_charged(client, pool, agency, worker):
    tenant, calendar, contact_id, slots = await arrange(client, agency, [SMS], phone="+14155550145")
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])
    response = await client.put(
        f"{CONTACTS}/{contact_id}/consent",
        headers=tenant.headers,
        json={"channel": "sms", "status": "revoked"},
    )
    assert response.status_code == 200

    await bring_forward(pool, tenant, appointment["id"])
    (entry,) = await settled(pool, tenant, appointment["id"])

    assert (entry["status"], entry["reason"]) == ("skipped", "contact_opted_out")
    assert await outbound(pool, tenant, contact_id) == []
    assert await balance(pool, tenant) == Decimal("1")


async def test_exactly_once_when_the_job_runs_twice_or_loses_its_outcome(client, pool, agency):
    tenant, calendar, contact_id, slots = await arrange(client, agency, [SMS], phone="+14155550144")
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])
    await bring_forward(pool, tenant, appointment["id"], seconds=-1)
    ctx = {"db": pool}

    assert await send_due_reminders(ctx, run_of(tenant, appointment["id"])) is None
    assert await send_due_reminders(ctx, run_of(tenant, appointment["id"])) is None
    # A run that sent, then died before writing the outcome: the plan still says pending.
    async with tenant_transaction(pool, tenant.schema) as conn:
        entries = await conn.fetchval(
            "SELECT reminders FROM appointments WHERE id = $1", uuid.UUID(appointment["id"])
        )
        entries[0]["status"] = "pending"
        await conn.execute(
            "UPDATE appointments SET reminders = $2 WHERE id = $1",
            uuid.UUID(appointment["id"]),
            entries,
        )
    assert await send_due_reminders(ctx, run_of(tenant, appointment["id"])) is None

    (entry,) = await plan_of(pool, tenant, appointment["id"])
    assert entry["status"] == "sent"
    assert len(await outbound(pool, tenant, contact_id)) == 1
    assert await balance(pool, tenant) == Decimal("1") - SMS_PRICE


async def test_a_reminder_not_yet_due_waits(client, pool, agency):
    tenant, calendar, contact_id, slots = await arrange(client, agency, [SMS], phone="+14155550143")
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[2]["start"])
    (entry,) = await plan_of(pool, tenant, appointment["id"])

    next_at = await send_due_reminders({"db": pool}, run_of(tenant, appointment["id"]))

    assert next_at == datetime.fromisoformat(entry["at"])
    assert await outbound(pool, tenant, contact_id) == []
    assert reminders_module.next_pending(await plan_of(pool, tenant, appointment["id"])) == next_at


async def test_a_run_that_raced_a_reschedule_sends_only_for_the_new_start(client, pool, agency):
    tenant, calendar, contact_id, slots = await arrange(client, agency, [SMS], phone="+14155550192")
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])
    # The old reminder came due and its job was queued; the reschedule commits first.
    await bring_forward(pool, tenant, appointment["id"], seconds=-1)
    response = await client.patch(
        f"{APPOINTMENTS}/{appointment['id']}",
        json={"start": slots[4]["start"]},
        headers=tenant.headers,
    )
    assert response.status_code == 200
    (moved,) = await plan_of(pool, tenant, appointment["id"])

    next_at = await send_due_reminders({"db": pool}, run_of(tenant, appointment["id"]))

    assert next_at == datetime.fromisoformat(moved["at"]) > utcnow()
    assert await outbound(pool, tenant, contact_id) == []
    assert await balance(pool, tenant) == Decimal("1")


# --- a worker killed holding a reminder (CONTRACT 18a) ------------------------------------------


class HeldSink:
    """An SMTP server that holds the first message unanswered until `opened` (a slow provider:
    the worker that sends it is caught mid-send), then accepts every message."""

    def __init__(self) -> None:
        self.host, self.port = "127.0.0.1", free_port()
        self.accepted: list[tuple[list[str], Message]] = []
        self.held = threading.Event()
        self.opened = threading.Event()
        self.arrived = threading.Event()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        if not self.opened.is_set():
            self.held.set()
            await asyncio.to_thread(self.opened.wait)
            return "451 4.3.0 Try again later"
        self.accepted.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        self.arrived.set()
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[Message]:
        return [message for rcpt, message in self.accepted if address in rcpt]


@pytest.fixture
def held_sink() -> Iterator[HeldSink]:
    from aiosmtpd.controller import Controller

    sink = HeldSink()
    controller = Controller(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        sink.opened.set()
        controller.stop()


def start_worker(sink: HeldSink) -> subprocess.Popen[bytes]:
    """`switchboard worker` as a process of its own, its email going to `sink`."""
    return worker_process(SMTP_HOST=sink.host, SMTP_PORT=str(sink.port))


# CONTRACT 18a: "within 30 s of their time once a worker runs" (a bound, not a benchmark).
AFTER_A_DEATH = 30.0


async def test_a_reminder_whose_worker_died_holding_it_goes_out_once_within_30_s(
    client, pool, agency, held_sink
):
    address = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    tenant, calendar, contact_id, slots = await arrange(client, agency, [EMAIL], email=address)
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])
    first = start_worker(held_sink)
    second = None
    try:
        # Given: the worker took the reminder and is mid-send (charged, the message recorded
        # queued, the provider not yet answering) when it is killed.
        await bring_forward(pool, tenant, appointment["id"])
        assert await asyncio.to_thread(held_sink.held.wait, 60)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        (entry,) = await plan_of(pool, tenant, appointment["id"])
        assert entry["status"] == "pending"
        held_sink.opened.set()

        # When: another worker starts at once (its due-work row still claimed by the dead one).
        started = time.monotonic()
        second = start_worker(held_sink)

        # Then: the reminder goes out within 30 s, once, with its own message id.
        assert await asyncio.to_thread(held_sink.arrived.wait, AFTER_A_DEATH + 15)
        took = time.monotonic() - started
        (entry,) = await settled(pool, tenant, appointment["id"])
        await asyncio.sleep(1)  # anything sent twice would have arrived by now
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)

    assert took <= AFTER_A_DEATH, f"sent {took:.1f} s after the new worker started"
    (message,) = held_sink.to(address)
    assert entry["status"] == "sent"
    assert message["Message-ID"] == f"<{entry['message_id']}@switchboard>"
    assert message["Subject"] == "Reminder: Dental"
    (stored,) = await outbound(pool, tenant, contact_id)
    assert (str(stored["id"]), stored["status"]) == (entry["message_id"], "sent")
    assert await balance(pool, tenant) == Decimal("1") - EMAIL_PRICE
    assert await due_rows(pool, appointment["id"]) == []
