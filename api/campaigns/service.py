"""Campaign rules: create (draft), read, schedule, cancel, resume, and the recipients' list.

The intent to send is durable twice over: the campaign row (status scheduled + start_date) and
its `campaign_send` row in the due-work index, written in the same transaction. Every state
change is one UPDATE guarded by the states it may leave and by the version that was read, so a
race yields 409 rather than a lost update.

A call campaign's due work is of kind `campaign_calls` (api.calls.service.CAMPAIGN_CALLS_WORK,
run by api/campaigns/dialer.py), which the end of each of its calls wakes as well.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

import asyncpg

from api import events
from api.calls.service import CAMPAIGN_CALLS_WORK
from api.campaigns import business_hours
from api.campaigns.queries import COMPLETE, SKIP_PENDING
from tenancy.clock import utcnow
from tenancy.db import fetch_one_or_404, fetch_page, where_clause
from tenancy.due import cancel_due, schedule_due
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

SEND_KIND = "campaign_send"
# A call campaign's calls at once, unless it says otherwise (CONTRACT 10).
CAMPAIGN_CALLS_AT_ONCE = 5

CAMPAIGN_COLUMNS = """
c.id, c.name, c.campaign_type, c.status, c.subject, c.message_content, c.contact_ids,
c.smart_list_id, c.start_date, c.business_hours_enabled, c.business_hours_config, c.version,
c.paused_reason, c.recipients_materialised_at, c.agent_id, c.pool_id, c.variables,
c.calling_window, c.max_concurrent_calls, c.retry, c.created_at, c.updated_at
"""

# The live counters of campaign `c`, as columns of `r`. A call campaign's recipient is contacted
# once called (a retry may still be pending); a message's once claimed.
COUNTERS = """
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE state <> 'skipped') AS recipients,
           count(*) FILTER (WHERE state = 'pending') AS pending,
           count(*) FILTER (WHERE CASE WHEN c.campaign_type = 'call'
                                       THEN cardinality(call_ids) > 0
                                       ELSE state IN ('sending', 'sent', 'failed') END)
               AS contacted,
           count(*) FILTER (WHERE state = 'sent') AS success,
           count(opened_at) AS opened,
           count(clicked_at) AS clicked,
           count(unsubscribed_at) AS unsubscribed
    FROM campaign_recipients WHERE campaign_id = c.id
) AS r
"""
COUNTER_COLUMNS = (
    "r.recipients, r.pending, r.contacted, r.success, r.opened, r.clicked, r.unsubscribed"
)

SELECT_CAMPAIGN = f"""
SELECT {CAMPAIGN_COLUMNS}, {COUNTER_COLUMNS}
FROM campaigns AS c
{COUNTERS}
WHERE c.id = $1
"""

# The page is chosen first, so counters are counted for its campaigns only. {where} is made
# by tenancy.db.where_clause from fixed fragments.
SELECT_CAMPAIGNS_PAGE = """
WITH page AS (
    SELECT id, created_at, count(*) OVER () AS total FROM campaigns
    {where}
    ORDER BY created_at DESC, id DESC
    LIMIT ${limit} OFFSET ${offset}
)
SELECT {columns}, {counters}, page.total
FROM page JOIN campaigns AS c ON c.id = page.id
{lateral}
ORDER BY page.created_at DESC, page.id DESC
"""

COUNT_CAMPAIGNS = "SELECT count(*) FROM campaigns {where}"

# Before recipients are materialised, every contact the campaign could reach now is pending.
# Contacts without an address on the channel (a phone for sms and call), or who revoked consent
# to it, are skipped at send time and are not recipients.
COUNT_TARGETS = """
SELECT count(*) FROM contacts AS c
WHERE (c.id = ANY($1::uuid[])
       OR c.tags && COALESCE((SELECT tags FROM smart_lists WHERE id = $2), '{}'::text[]))
  AND CASE WHEN $3 = 'email' THEN c.email IS NOT NULL ELSE c.phone IS NOT NULL END
  AND NOT EXISTS (SELECT 1 FROM contact_consents AS k
                  WHERE k.contact_id = c.id AND k.channel = $3 AND k.status = 'revoked')
"""

SELECT_EXISTING_CONTACTS = "SELECT id FROM contacts WHERE id = ANY($1::uuid[])"
SMART_LIST_EXISTS = "SELECT EXISTS (SELECT 1 FROM smart_lists WHERE id = $1)"
AGENT_EXISTS = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND deleted_at IS NULL)"
POOL_EXISTS = "SELECT EXISTS (SELECT 1 FROM number_pools WHERE id = $1)"

INSERT_CAMPAIGN = """
INSERT INTO campaigns
    (name, campaign_type, subject, message_content, contact_ids, smart_list_id,
     business_hours_enabled, business_hours_config, agent_id, pool_id, variables,
     calling_window, max_concurrent_calls, retry)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
RETURNING id
"""

SELECT_FOR_SCHEDULE = """
SELECT id, campaign_type, status, subject, message_content, contact_ids, smart_list_id, version,
       agent_id
FROM campaigns WHERE id = $1
"""

SCHEDULE = """
UPDATE campaigns
SET status = 'scheduled', start_date = $2, version = version + 1, updated_at = now()
WHERE id = $1 AND status IN ('draft', 'scheduled') AND version = $3
RETURNING id
"""

# A call campaign may be cancelled while it calls (or is paused): its calls on the line finish,
# no new one starts.
CANCEL = """
UPDATE campaigns SET status = 'cancelled', version = version + 1, updated_at = now()
WHERE id = $1
  AND (status IN ('draft', 'scheduled')
       OR (campaign_type = 'call' AND status IN ('sending', 'paused')))
RETURNING id, campaign_type
"""

SELECT_KIND = "SELECT campaign_type FROM campaigns WHERE id = $1"

RESUME = """
UPDATE campaigns
SET status = $2, start_date = $3, paused_reason = NULL, version = version + 1,
    updated_at = now()
WHERE id = $1 AND status = 'paused'
RETURNING id
"""

EXISTS = "SELECT EXISTS (SELECT 1 FROM campaigns WHERE id = $1)"

# The recipients of a campaign in the order they were fixed (at its start), with the message
# a message campaign sent each one (the one it recorded in the contact's conversation).
SELECT_RECIPIENTS_PAGE = """
SELECT r.contact_id, r.state, r.attempts, r.call_ids, r.outcome, r.error,
       (SELECT m.id FROM conversations AS v JOIN messages AS m ON m.conversation_id = v.id
        WHERE v.contact_id = r.contact_id AND m.campaign_id = r.campaign_id
        ORDER BY m.created_at LIMIT 1) AS message_id,
       count(*) OVER () AS total
FROM campaign_recipients AS r
WHERE r.campaign_id = $1
ORDER BY r.created_at, r.id
LIMIT $2 OFFSET $3
"""

COUNT_RECIPIENTS = "SELECT count(*) FROM campaign_recipients WHERE campaign_id = $1"

# The API's words for the recipient states (CONTRACT 10).
RECIPIENT_STATUS = {
    "pending": "pending",
    "sending": "in_progress",
    "sent": "done",
    "skipped": "skipped",
    "failed": "failed",
}


@dataclass(frozen=True)
class NewCampaign:
    name: str
    campaign_type: str
    subject: str | None
    message_content: str | None
    contact_ids: list[uuid.UUID]
    smart_list_id: uuid.UUID | None
    business_hours_enabled: bool
    business_hours_config: dict[str, Any] | None
    calling: CallSettings | None = None


@dataclass(frozen=True)
class CallSettings:
    """What only a call campaign has (CONTRACT 10): who calls, from which pool, with which
    variables, when (window, stored normalised), how many at once, and the retry policy
    (`{max_attempts, delay_minutes, on}`, defaults filled in)."""

    agent_id: uuid.UUID
    pool_id: uuid.UUID | None
    variables: dict[str, str]
    calling_window: dict[str, Any] | None
    max_concurrent_calls: int
    retry: dict[str, Any]


def present(row: asyncpg.Record, targets: int | None = None) -> dict[str, Any]:
    """The Campaign of the spec, with counters that are true at the moment of reading."""
    recipients, pending = row["recipients"], row["pending"]
    if row["recipients_materialised_at"] is None and targets is not None:
        recipients = pending = targets
    contacted = row["contacted"]
    return {
        "id": row["id"],
        "name": row["name"],
        "campaign_type": row["campaign_type"],
        "status": row["status"],
        "subject": row["subject"],
        "message_content": row["message_content"],
        "contact_ids": row["contact_ids"],
        "smart_list_id": row["smart_list_id"],
        "start_date": row["start_date"],
        "business_hours_enabled": row["business_hours_enabled"],
        "business_hours_config": row["business_hours_config"],
        "progress": round(contacted * 100 / recipients, 2) if recipients else 0.0,
        "contacted": contacted,
        "success": row["success"],
        "pending": pending,
        "opened_count": row["opened"],
        "clicked_count": row["clicked"],
        "unsubscribed_count": row["unsubscribed"],
        "paused_reason": row["paused_reason"],
        **_call_fields(row),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def _call_fields(row: asyncpg.Record) -> dict[str, Any]:
    """A call campaign's own fields; null for email and SMS campaigns."""
    calling = row["campaign_type"] == "call"
    return {
        "agent_id": row["agent_id"],
        "pool_id": row["pool_id"],
        "variables": row["variables"] if calling else None,
        "calling_window": row["calling_window"],
        "max_concurrent_calls": row["max_concurrent_calls"],
        "retry": row["retry"],
    }


async def _presented(
    conn: asyncpg.Connection, row: asyncpg.Record | dict[str, Any]
) -> dict[str, Any]:
    targets = None
    if row["recipients_materialised_at"] is None and row["status"] in ("draft", "scheduled"):
        targets = await conn.fetchval(
            COUNT_TARGETS, row["contact_ids"], row["smart_list_id"], row["campaign_type"]
        )
    return present(row, targets)


async def read_campaign(conn: asyncpg.Connection, campaign_id: uuid.UUID) -> dict[str, Any]:
    row = await fetch_one_or_404(conn, SELECT_CAMPAIGN, campaign_id, what="campaign")
    return await _presented(conn, row)


async def list_campaigns(
    scope: TenantScope, status: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of campaigns, newest first, each as GET /campaigns/{id} shows it."""
    where, values = where_clause([("status = $?", status)])
    query = SELECT_CAMPAIGNS_PAGE.format(
        where=where,
        limit=len(values) + 1,
        offset=len(values) + 2,
        columns=CAMPAIGN_COLUMNS,
        counters=COUNTER_COLUMNS,
        lateral=COUNTERS,
    )
    async with scope.transaction() as conn:
        rows, total = await fetch_page(
            conn,
            query,
            COUNT_CAMPAIGNS.format(where=where),
            *values,
            limit,
            offset,
            count_args=tuple(values),
        )
        return [await _presented(conn, row) for row in rows], total


async def complete_if_done(
    conn: asyncpg.Connection, sub_account_id: uuid.UUID, campaign_id: uuid.UUID
) -> bool:
    """A sending campaign with every recipient settled is completed (`campaign.completed`,
    emitted last in the caller's transaction); False while anyone is left."""
    if await conn.fetchval(COMPLETE, campaign_id) is None:
        return False
    await events.emit(
        conn,
        "campaign.completed",
        {
            "sub_account_id": str(sub_account_id),
            "campaign": await read_campaign(conn, campaign_id),
        },
    )
    return True


async def get_campaign(scope: TenantScope, campaign_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        return await read_campaign(conn, campaign_id)


async def create_campaign(scope: TenantScope, new: NewCampaign) -> dict[str, Any]:
    calling = new.calling
    async with scope.transaction() as conn:
        await _check_references(conn, new.contact_ids, new.smart_list_id)
        if calling is not None:
            await _check_caller(conn, calling)
        campaign_id = await conn.fetchval(
            INSERT_CAMPAIGN,
            new.name,
            new.campaign_type,
            new.subject,
            new.message_content,
            new.contact_ids,
            new.smart_list_id,
            new.business_hours_enabled,
            new.business_hours_config,
            calling.agent_id if calling else None,
            calling.pool_id if calling else None,
            calling.variables if calling else {},
            calling.calling_window if calling else None,
            calling.max_concurrent_calls if calling else None,
            calling.retry if calling else None,
        )
        return await read_campaign(conn, campaign_id)


async def _check_caller(conn: asyncpg.Connection, calling: CallSettings) -> None:
    """The agent and the pool are the sub-account's (else 404, as for a smart list)."""
    if not await conn.fetchval(AGENT_EXISTS, calling.agent_id):
        raise not_found("agent")
    if calling.pool_id is not None and not await conn.fetchval(POOL_EXISTS, calling.pool_id):
        raise not_found("number pool")


async def _check_references(
    conn: asyncpg.Connection, contact_ids: list[uuid.UUID], smart_list_id: uuid.UUID | None
) -> None:
    if contact_ids:
        found = {row["id"] for row in await conn.fetch(SELECT_EXISTING_CONTACTS, contact_ids)}
        missing = [str(value) for value in contact_ids if value not in found]
        if missing:
            raise APIError(
                404,
                "not_found",
                "contact not found: " + ", ".join(missing[:5]),
                details=[{"field": "contact_ids", "message": "not found", "type": "not_found"}],
            )
    if smart_list_id is not None and not await conn.fetchval(SMART_LIST_EXISTS, smart_list_id):
        raise not_found("smart list")


def _not_ready(message: str) -> APIError:
    return APIError(400, "campaign_not_ready", message)


def _conflict(status: str) -> APIError:
    return APIError(
        409,
        "campaign_state_conflict",
        f"the campaign is {status}; only a draft or scheduled campaign can be scheduled",
    )


def check_ready(row: asyncpg.Record) -> None:
    """Content present (and a subject for email), and someone to send it to (or to call)."""
    if row["campaign_type"] != "call" and not (row["message_content"] or "").strip():
        raise _not_ready("message_content is required before scheduling")
    if row["campaign_type"] == "email" and not (row["subject"] or "").strip():
        raise _not_ready("subject is required before scheduling an email campaign")
    if not row["contact_ids"] and row["smart_list_id"] is None:
        raise _not_ready("set contact_ids or smart_list_id before scheduling")


async def schedule_campaign(
    scope: TenantScope, campaign_id: uuid.UUID, start_date: datetime
) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_FOR_SCHEDULE, campaign_id, what="campaign")
        if row["status"] not in ("draft", "scheduled"):
            raise _conflict(row["status"])
        check_ready(row)
        if await conn.fetchval(SCHEDULE, campaign_id, start_date, row["version"]) is None:
            raise APIError(
                409,
                "campaign_state_conflict",
                "the campaign changed while it was being scheduled; read it again",
            )
        kind = due_kind(row["campaign_type"])
        await schedule_due(conn, scope.sub_account_id, kind, campaign_id, start_date)
        return await read_campaign(conn, campaign_id)


def due_kind(campaign_type: str) -> str:
    """The kind of due work that runs a campaign of this type."""
    return CAMPAIGN_CALLS_WORK if campaign_type == "call" else SEND_KIND


async def cancel_campaign(scope: TenantScope, campaign_id: uuid.UUID) -> dict[str, Any]:
    """Nothing more is sent or called; a call campaign's calls on the line finish, and its
    dispatcher settles their recipients (woken by their ends)."""
    async with scope.transaction() as conn:
        row = await conn.fetchrow(CANCEL, campaign_id)
        if row is None:
            await _missing_or_conflict(
                conn, campaign_id, "cancelled", "draft or scheduled (a call campaign: or sending)"
            )
        if row["campaign_type"] == "call":
            # What is still to call is skipped; a recipient on a call is settled when it ends.
            await conn.execute(SKIP_PENDING, campaign_id, "campaign_cancelled")
        else:
            await cancel_due(conn, SEND_KIND, campaign_id)
        return await read_campaign(conn, campaign_id)


async def resume_campaign(
    scope: TenantScope, campaign_id: uuid.UUID, start_date: datetime | None
) -> dict[str, Any]:
    """paused -> scheduled (at a future start_date) or sending (at once)."""
    status = "sending" if start_date is None else "scheduled"
    due_at = start_date or utcnow()
    async with scope.transaction() as conn:
        if await conn.fetchval(RESUME, campaign_id, status, start_date) is None:
            await _missing_or_conflict(conn, campaign_id, "resumed", "paused")
        kind = due_kind(await conn.fetchval(SELECT_KIND, campaign_id))
        await schedule_due(conn, scope.sub_account_id, kind, campaign_id, due_at)
        return await read_campaign(conn, campaign_id)


async def list_recipients(
    scope: TenantScope, campaign_id: uuid.UUID, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of the campaign's recipients (none before it starts: they are fixed then)."""
    async with scope.transaction() as conn:
        if not await conn.fetchval(EXISTS, campaign_id):
            raise not_found("campaign")
        rows, total = await fetch_page(
            conn,
            SELECT_RECIPIENTS_PAGE,
            COUNT_RECIPIENTS,
            campaign_id,
            limit,
            offset,
            count_args=(campaign_id,),
        )
    return [
        {
            "contact_id": row["contact_id"],
            "status": RECIPIENT_STATUS[row["state"]],
            "attempts": row["attempts"],
            "call_ids": row["call_ids"],
            "message_id": row["message_id"],
            "outcome": row["outcome"],
            "error": row["error"],
        }
        for row in rows
    ], total


async def _missing_or_conflict(
    conn: asyncpg.Connection, campaign_id: uuid.UUID, verb: str, allowed: str
) -> NoReturn:
    if not await conn.fetchval(EXISTS, campaign_id):
        raise not_found("campaign")
    raise APIError(409, "campaign_state_conflict", f"only a {allowed} campaign can be {verb}")


def checked_business_hours(enabled: bool, config: Any) -> dict[str, Any] | None:
    """The config to store; 400 when it is invalid, or missing while enabled."""
    if config is None:
        if enabled:
            raise APIError(
                400,
                "validation_error",
                "business_hours_config is required when business_hours_enabled",
                details=[
                    {
                        "field": "business_hours_config",
                        "message": "field required",
                        "type": "missing",
                    }
                ],
            )
        return None
    return checked_hours(config, "business_hours_config")


def checked_hours(config: Any, name: str) -> dict[str, Any]:
    """Hours (business_hours_config, or a call campaign's calling_window) in their stored form;
    400 naming each problem."""
    problems = business_hours.validate_config(config, name)
    if problems:
        raise APIError(400, "validation_error", f"{name} is invalid", details=problems)
    return business_hours.normalised(config)
