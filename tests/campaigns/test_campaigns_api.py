"""Campaign create, read, schedule, cancel, resume: every status code, no sending involved."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from tenancy.clock import utcnow
from tenancy.db import tenant_transaction
from tests.factories import CAMPAIGNS, add_contact, create_campaign
from tests.helpers import error_code, get_campaign, schedule, soon

LATER = timedelta(hours=1)


async def _draft(client, tenant, **fields):
    contact = await add_contact(client, tenant)
    return await create_campaign(client, tenant, contact_ids=[contact], **fields)


# --- create -------------------------------------------------------------------------------------


async def test_create_is_a_draft_with_the_spec_fields(client, tenant):
    contact = await add_contact(client, tenant)
    response = await client.post(
        CAMPAIGNS,
        json={
            "name": "Launch",
            "campaign_type": "email",
            "subject": "Hi",
            "message_content": "<p>x</p>",
            "contact_ids": [contact],
        },
        headers=tenant.headers,
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["status"] == "success"
    campaign = body["campaign"]
    assert campaign["status"] == "draft"
    assert campaign["contact_ids"] == [contact]
    assert campaign["smart_list_id"] is None and campaign["start_date"] is None
    assert campaign["business_hours_enabled"] is False
    assert campaign["business_hours_config"] is None
    assert (campaign["pending"], campaign["contacted"], campaign["success"]) == (1, 0, 0)
    assert campaign["progress"] == 0
    assert (
        campaign["opened_count"],
        campaign["clicked_count"],
        campaign["unsubscribed_count"],
    ) == (0, 0, 0)
    assert campaign["created_at"].endswith("Z")


async def test_create_without_content_is_a_draft(client, tenant):
    response = await client.post(
        CAMPAIGNS, json={"name": "Later", "campaign_type": "sms"}, headers=tenant.headers
    )
    assert response.status_code == 201
    campaign = (await response.get_json())["campaign"]
    assert campaign["message_content"] is None and campaign["subject"] is None
    assert campaign["contact_ids"] == [] and campaign["pending"] == 0


async def test_create_unknown_campaign_type_is_400(client, tenant):
    response = await client.post(
        CAMPAIGNS, json={"name": "x", "campaign_type": "fax"}, headers=tenant.headers
    )
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_create_without_name_is_400(client, tenant):
    response = await client.post(
        CAMPAIGNS, json={"campaign_type": "email", "name": "  "}, headers=tenant.headers
    )
    assert response.status_code == 400


async def test_create_contact_id_not_uuid_is_400(client, tenant):
    response = await client.post(
        CAMPAIGNS,
        json={"name": "x", "campaign_type": "email", "contact_ids": ["nope"]},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_create_with_contact_of_another_sub_account_is_404(client, tenant, tenant_second):
    foreign = await add_contact(client, tenant_second)
    response = await client.post(
        CAMPAIGNS,
        json={"name": "x", "campaign_type": "email", "contact_ids": [foreign]},
        headers=tenant.headers,
    )
    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_create_with_smart_list_of_another_sub_account_is_404(client, tenant, tenant_second):
    response = await client.post(
        f"{CAMPAIGNS[:-10]}/smart-lists",
        json={"name": "vip", "tags": ["vip"]},
        headers=tenant_second.headers,
    )
    foreign = (await response.get_json())["smart_list"]["id"]
    response = await client.post(
        CAMPAIGNS,
        json={"name": "x", "campaign_type": "email", "smart_list_id": foreign},
        headers=tenant.headers,
    )
    assert response.status_code == 404


async def test_create_business_hours_enabled_without_config_is_400(client, tenant):
    response = await client.post(
        CAMPAIGNS,
        json={"name": "x", "campaign_type": "email", "business_hours_enabled": True},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_create_invalid_business_hours_config_is_400(client, tenant):
    config = {
        "timezone": "Mars/Olympus",
        "days": ["mon", "funday"],
        "start": "9:00",
        "end": "08:00",
        "extra": 1,
    }
    response = await client.post(
        CAMPAIGNS,
        json={
            "name": "x",
            "campaign_type": "email",
            "business_hours_enabled": True,
            "business_hours_config": config,
        },
        headers=tenant.headers,
    )
    assert response.status_code == 400
    fields = {detail["field"] for detail in (await response.get_json())["error"]["details"]}
    assert fields == {
        "business_hours_config.timezone",
        "business_hours_config.days",
        "business_hours_config.start",
        "business_hours_config.extra",
    }


async def test_create_business_hours_end_before_start_is_400(client, tenant):
    config = {"timezone": "Europe/Paris", "days": ["mon"], "start": "17:00", "end": "09:00"}
    response = await client.post(
        CAMPAIGNS,
        json={
            "name": "x",
            "campaign_type": "email",
            "business_hours_enabled": True,
            "business_hours_config": config,
        },
        headers=tenant.headers,
    )
    assert response.status_code == 400


async def test_create_keeps_a_valid_business_hours_config(client, tenant):
    config = {
        "timezone": "Europe/Paris",
        "days": ["fri", "mon", "mon"],
        "start": "09:00",
        "end": "17:30",
    }
    campaign = await create_campaign(
        client, tenant, business_hours_enabled=True, business_hours_config=config
    )
    assert campaign["business_hours_config"] == {
        "timezone": "Europe/Paris",
        "days": ["mon", "fri"],
        "start": "09:00",
        "end": "17:30",
    }


async def test_create_sms_content_over_1600_is_400(client, tenant):
    response = await client.post(
        CAMPAIGNS,
        json={"name": "x", "campaign_type": "sms", "message_content": "a" * 1601},
        headers=tenant.headers,
    )
    assert response.status_code == 400


async def test_create_without_key_is_401(client):
    response = await client.post(CAMPAIGNS, json={"name": "x", "campaign_type": "email"})
    assert response.status_code == 401


async def test_create_with_agency_key_is_401(client, tenant):
    response = await client.post(
        CAMPAIGNS, json={"name": "x", "campaign_type": "email"}, headers=tenant.organisation.headers
    )
    assert response.status_code == 401


# --- read ---------------------------------------------------------------------------------------


async def test_get_returns_the_campaign(client, tenant):
    campaign = await _draft(client, tenant)
    assert (await get_campaign(client, tenant, campaign["id"]))["id"] == campaign["id"]


async def test_get_id_not_uuid_is_400(client, tenant):
    response = await client.get(f"{CAMPAIGNS}/123", headers=tenant.headers)
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_get_unknown_is_404(client, tenant):
    response = await client.get(f"{CAMPAIGNS}/{uuid.uuid4()}", headers=tenant.headers)
    assert response.status_code == 404


async def test_get_campaign_of_another_sub_account_is_404(client, tenant, tenant_second):
    foreign = await _draft(client, tenant_second)
    response = await client.get(f"{CAMPAIGNS}/{foreign['id']}", headers=tenant.headers)
    assert response.status_code == 404


# --- schedule -----------------------------------------------------------------------------------


async def test_schedule_draft_is_200_scheduled(client, tenant, pool):
    campaign = await _draft(client, tenant)
    start = utcnow() + LATER
    response = await schedule(client, tenant, campaign["id"], start)
    assert response.status_code == 200
    scheduled = (await response.get_json())["campaign"]
    assert scheduled["status"] == "scheduled"
    assert scheduled["start_date"].startswith(start.strftime("%Y-%m-%dT%H:%M"))
    due = await pool.fetchrow(
        "SELECT sub_account_id, due_at FROM control.due_work "
        "WHERE kind = 'campaign_send' AND ref_id = $1",
        uuid.UUID(campaign["id"]),
    )
    assert due["sub_account_id"] == tenant.id
    assert abs(due["due_at"] - start) < timedelta(milliseconds=1)


async def test_reschedule_replaces_start_date(client, tenant, pool):
    campaign = await _draft(client, tenant)
    await schedule(client, tenant, campaign["id"], utcnow() + LATER)
    later = utcnow() + 2 * LATER
    response = await schedule(client, tenant, campaign["id"], later)
    assert response.status_code == 200
    assert (await response.get_json())["campaign"]["start_date"].startswith(
        later.strftime("%Y-%m-%dT%H:%M")
    )
    rows = await pool.fetch(
        "SELECT due_at FROM control.due_work WHERE ref_id = $1", uuid.UUID(campaign["id"])
    )
    assert [abs(row["due_at"] - later) < timedelta(milliseconds=1) for row in rows] == [True]


async def test_schedule_with_offset_timezone_is_accepted(client, tenant):
    campaign = await _draft(client, tenant)
    response = await client.post(
        f"{CAMPAIGNS}/{campaign['id']}/schedule",
        json={"start_date": "2099-01-01T10:00:00+02:00"},
        headers=tenant.headers,
    )
    assert response.status_code == 200
    assert (await response.get_json())["campaign"]["start_date"] == "2099-01-01T08:00:00.000Z"


async def test_schedule_start_date_in_the_past_is_400(client, tenant):
    campaign = await _draft(client, tenant)
    response = await schedule(client, tenant, campaign["id"], utcnow() - timedelta(minutes=1))
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"
    assert (await get_campaign(client, tenant, campaign["id"]))["status"] == "draft"


async def test_schedule_start_date_not_a_datetime_is_400(client, tenant):
    campaign = await _draft(client, tenant)
    for value in ("tomorrow", "2099-13-01T00:00:00Z", ""):
        response = await client.post(
            f"{CAMPAIGNS}/{campaign['id']}/schedule",
            json={"start_date": value},
            headers=tenant.headers,
        )
        assert response.status_code == 400, value


async def test_schedule_start_date_without_timezone_is_400(client, tenant):
    campaign = await _draft(client, tenant)
    response = await client.post(
        f"{CAMPAIGNS}/{campaign['id']}/schedule",
        json={"start_date": "2099-01-01T10:00:00"},
        headers=tenant.headers,
    )
    assert response.status_code == 400


async def test_schedule_start_date_as_number_or_missing_is_400(client, tenant):
    campaign = await _draft(client, tenant)
    for body in ({"start_date": 4102444800}, {}):
        response = await client.post(
            f"{CAMPAIGNS}/{campaign['id']}/schedule", json=body, headers=tenant.headers
        )
        assert response.status_code == 400, body
        assert await error_code(response) == "validation_error"


async def test_schedule_without_content_is_400_campaign_not_ready(client, tenant):
    contact = await add_contact(client, tenant)
    response = await client.post(
        CAMPAIGNS,
        json={"name": "x", "campaign_type": "email", "subject": "s", "contact_ids": [contact]},
        headers=tenant.headers,
    )
    campaign = (await response.get_json())["campaign"]
    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 400
    assert await error_code(response) == "campaign_not_ready"


async def test_schedule_email_without_subject_is_400_campaign_not_ready(client, tenant):
    campaign = await _draft(client, tenant, subject=None)
    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 400
    assert await error_code(response) == "campaign_not_ready"


async def test_schedule_sms_needs_no_subject(client, tenant):
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(
        client,
        tenant,
        campaign_type="sms",
        subject=None,
        message_content="Hi",
        contact_ids=[contact],
    )
    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 200


async def test_schedule_without_recipients_is_400_campaign_not_ready(client, tenant):
    campaign = await create_campaign(client, tenant)
    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 400
    assert await error_code(response) == "campaign_not_ready"


async def test_schedule_with_smart_list_only_is_200(client, tenant):
    response = await client.post(
        "/webhooks/inbound/smart-lists",
        json={"name": "vip", "tags": ["vip"]},
        headers=tenant.headers,
    )
    smart_list = (await response.get_json())["smart_list"]["id"]
    campaign = await create_campaign(client, tenant, smart_list_id=smart_list)
    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 200


async def test_schedule_cancelled_campaign_is_409(client, tenant):
    campaign = await _draft(client, tenant)
    await client.post(f"{CAMPAIGNS}/{campaign['id']}/cancel", headers=tenant.headers)
    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 409
    assert await error_code(response) == "campaign_state_conflict"


async def test_schedule_sending_completed_paused_failed_is_409(client, tenant, pool):
    campaign = await _draft(client, tenant)
    for status in ("sending", "completed", "paused", "failed"):
        async with tenant_transaction(pool, tenant.schema) as conn:
            await conn.execute(
                "UPDATE campaigns SET status = $2 WHERE id = $1", uuid.UUID(campaign["id"]), status
            )
        response = await schedule(client, tenant, campaign["id"], soon(3600))
        assert response.status_code == 409, status
        assert (await get_campaign(client, tenant, campaign["id"]))["status"] == status


async def test_schedule_state_changed_between_read_and_write_is_409(client, tenant, pool):
    campaign = await _draft(client, tenant)
    campaign_id = uuid.UUID(campaign["id"])
    async with tenant_transaction(pool, tenant.schema) as conn:
        # Hold the row: the schedule request reads it (plain reads do not wait), then blocks
        # on its guarded UPDATE until this transaction has cancelled the campaign.
        await conn.execute("SELECT id FROM campaigns WHERE id = $1 FOR UPDATE", campaign_id)
        request = asyncio.create_task(schedule(client, tenant, campaign["id"], soon(3600)))
        while not await pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE '%UPDATE campaigns%'"
        ):
            assert not request.done(), await request.get_data(as_text=True)
            await asyncio.sleep(0.01)
        await conn.execute("UPDATE campaigns SET status = 'cancelled' WHERE id = $1", campaign_id)
    response = await request
    assert response.status_code == 409
    assert await error_code(response) == "campaign_state_conflict"
    assert (await get_campaign(client, tenant, campaign["id"]))["status"] == "cancelled"


async def test_schedule_unknown_campaign_is_404(client, tenant):
    response = await schedule(client, tenant, str(uuid.uuid4()), soon(3600))
    assert response.status_code == 404


async def test_schedule_campaign_of_another_sub_account_is_404(client, tenant, tenant_second):
    foreign = await _draft(client, tenant_second)
    response = await schedule(client, tenant, foreign["id"], soon(3600))
    assert response.status_code == 404
    assert (await get_campaign(client, tenant_second, foreign["id"]))["status"] == "draft"


async def test_schedule_id_not_uuid_is_400(client, tenant):
    response = await schedule(client, tenant, "not-a-uuid", soon(3600))
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_schedule_without_key_is_401(client, tenant):
    campaign = await _draft(client, tenant)
    response = await client.post(
        f"{CAMPAIGNS}/{campaign['id']}/schedule", json={"start_date": soon(3600).isoformat()}
    )
    assert response.status_code == 401


# --- cancel -------------------------------------------------------------------------------------


async def test_cancel_draft_is_200_cancelled(client, tenant):
    campaign = await _draft(client, tenant)
    response = await client.post(f"{CAMPAIGNS}/{campaign['id']}/cancel", headers=tenant.headers)
    assert response.status_code == 200
    assert (await response.get_json())["campaign"]["status"] == "cancelled"


async def test_cancel_scheduled_forgets_the_due_work(client, tenant, pool):
    campaign = await _draft(client, tenant)
    await schedule(client, tenant, campaign["id"], soon(3600))
    response = await client.post(f"{CAMPAIGNS}/{campaign['id']}/cancel", headers=tenant.headers)
    assert response.status_code == 200
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.due_work WHERE ref_id = $1", uuid.UUID(campaign["id"])
        )
        == 0
    )


async def test_cancel_twice_is_409(client, tenant):
    campaign = await _draft(client, tenant)
    await client.post(f"{CAMPAIGNS}/{campaign['id']}/cancel", headers=tenant.headers)
    response = await client.post(f"{CAMPAIGNS}/{campaign['id']}/cancel", headers=tenant.headers)
    assert response.status_code == 409
    assert await error_code(response) == "campaign_state_conflict"


async def test_cancel_unknown_is_404_and_not_uuid_is_400(client, tenant):
    response = await client.post(f"{CAMPAIGNS}/{uuid.uuid4()}/cancel", headers=tenant.headers)
    assert response.status_code == 404
    response = await client.post(f"{CAMPAIGNS}/x/cancel", headers=tenant.headers)
    assert response.status_code == 400


async def test_cancel_campaign_of_another_sub_account_is_404(client, tenant, tenant_second):
    foreign = await _draft(client, tenant_second)
    response = await client.post(f"{CAMPAIGNS}/{foreign['id']}/cancel", headers=tenant.headers)
    assert response.status_code == 404
    assert (await get_campaign(client, tenant_second, foreign["id"]))["status"] == "draft"


# --- resume -------------------------------------------------------------------------------------


async def test_resume_a_draft_is_409(client, tenant):
    campaign = await _draft(client, tenant)
    response = await client.post(f"{CAMPAIGNS}/{campaign['id']}/resume", headers=tenant.headers)
    assert response.status_code == 409
    assert await error_code(response) == "campaign_state_conflict"


async def test_resume_paused_with_future_start_date_is_scheduled(client, tenant, pool):
    campaign = await _draft(client, tenant)
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET status = 'paused', paused_reason = 'x' WHERE id = $1",
            uuid.UUID(campaign["id"]),
        )
    start = soon(3600)
    response = await client.post(
        f"{CAMPAIGNS}/{campaign['id']}/resume",
        json={"start_date": start.isoformat()},
        headers=tenant.headers,
    )
    assert response.status_code == 200
    resumed = (await response.get_json())["campaign"]
    assert resumed["status"] == "scheduled" and resumed["paused_reason"] is None


async def test_resume_with_past_start_date_is_400(client, tenant, pool):
    campaign = await _draft(client, tenant)
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET status = 'paused' WHERE id = $1", uuid.UUID(campaign["id"])
        )
    response = await client.post(
        f"{CAMPAIGNS}/{campaign['id']}/resume",
        json={"start_date": "2000-01-01T00:00:00Z"},
        headers=tenant.headers,
    )
    assert response.status_code == 400
    assert (await get_campaign(client, tenant, campaign["id"]))["status"] == "paused"


async def test_resume_unknown_is_404_and_other_sub_account_is_404(client, tenant, tenant_second):
    response = await client.post(f"{CAMPAIGNS}/{uuid.uuid4()}/resume", headers=tenant.headers)
    assert response.status_code == 404
    foreign = await _draft(client, tenant_second)
    response = await client.post(f"{CAMPAIGNS}/{foreign['id']}/resume", headers=tenant.headers)
    assert response.status_code == 404
    response = await client.post(f"{CAMPAIGNS}/nope/resume", headers=tenant.headers)
    assert response.status_code == 400
