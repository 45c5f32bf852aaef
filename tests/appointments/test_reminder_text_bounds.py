"""A reminder's rendered text is bounded (CONTRACT 18a): each placeholder renders at most 1,000
characters, and an SMS reminder whose text renders longer than 1,600 characters is sent cut there
(one message, charged once)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from api.appointments.tasks import send_due_reminders
from tenancy.clock import utcnow
from tests.appointments.test_reminders import bring_forward, outbound, plan_of, run_of
from tests.factories import (
    SMS_PRICE,
    book,
    create_calendar,
    create_contact,
    credit,
    define_custom_field,
    free_slots,
    make_priced_tenant,
)
from tests.helpers import balance

# 43 placeholders of a 10,000-character custom field: 430,000 characters rendered whole.
TEMPLATE = "{{contact.custom.note}}" * 43


async def test_an_sms_reminder_rendering_430000_characters_is_sent_as_1600(client, pool, agency):
    tenant = await make_priced_tenant(client, agency)
    await credit(client, tenant, 1)
    reminder = {"minutes_before": 1, "channel": "sms", "template": TEMPLATE}
    calendar = await create_calendar(client, tenant, slot_minutes=5, reminders=[reminder])
    await define_custom_field(client, tenant, key="note", field_type="text")
    contact_id = await create_contact(
        client, tenant, phone="+14155550151", custom_field_values={"note": "n" * 10_000}
    )
    today = utcnow().date()
    slots = await free_slots(
        client, tenant, calendar["id"], today.isoformat(), (today + timedelta(days=1)).isoformat()
    )
    appointment = await book(client, tenant, calendar["id"], contact_id, slots[1]["start"])
    await bring_forward(pool, tenant, appointment["id"], seconds=-1)

    await send_due_reminders({"db": pool}, run_of(tenant, appointment["id"]))

    (entry,) = await plan_of(pool, tenant, appointment["id"])
    assert entry["status"] == "sent", entry
    (message,) = await outbound(pool, tenant, contact_id)
    assert (message["message_type"], message["status"]) == ("sms", "sent")
    assert message["content"] == "n" * 1600
    assert await balance(pool, tenant) == Decimal("1") - SMS_PRICE
