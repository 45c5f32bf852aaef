"""Phone number rules: reads in the request, provider work in the worker.

Purchase, import, assign and release reach the provider from a job, and the database changes
only once the provider has succeeded (or the provider work is undone).

A request that must report the provider's result enqueues the job and waits for it for at most
`SWITCHBOARD_TELEPHONY_TIMEOUT_SECONDS`. The job carries a deadline a little before that: it
never starts, and never commits, after it, so a request answered 502 for a timeout leaves the
database as it was.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import phonenumbers

from api.wallet import service as wallet
from integrations.telephony import (
    HeldNumber,
    NoNumbersAvailable,
    Providers,
    TelephonyError,
    TelephonyProvider,
)
from tenancy import phone_directory
from tenancy.clock import utcnow
from tenancy.db import fetch_one_or_404
from tenancy.due import cancel_due, schedule_due
from tenancy.errors import APIError, not_found
from tenancy.scope import TenantScope

log = logging.getLogger("switchboard.telephony")

E164 = re.compile(r"^\+[1-9]\d{1,14}$")
RENEWAL_WORK = "phone_number_renewal"
RENEWAL_RETRY = timedelta(days=1)
# A purchased number another sub-account turns out to hold is given back and another is bought.
PURCHASE_ATTEMPTS = 3

NUMBER_COLUMNS = """
p.id, p.phone_number, p.purchased, p.agent_id, a.name AS agent_name, p.is_active,
p.purchased_at, p.next_billing_date
"""

SELECT_NUMBER = f"""
SELECT {NUMBER_COLUMNS}
FROM phone_numbers AS p LEFT JOIN agents AS a ON a.id = p.agent_id
WHERE p.id = $1 AND p.is_active
"""

SELECT_NUMBERS = f"""
SELECT {NUMBER_COLUMNS}
FROM phone_numbers AS p LEFT JOIN agents AS a ON a.id = p.agent_id
WHERE p.is_active
ORDER BY p.phone_number
"""

LOCK_NUMBER = """
SELECT id, phone_number, purchased, agent_id, provider, provider_ref, dispatch_rule_id
FROM phone_numbers WHERE id = $1 AND is_active
FOR UPDATE
"""

SELECT_HELD = "SELECT phone_number FROM phone_numbers WHERE is_active"

NUMBER_HELD = "SELECT EXISTS (SELECT 1 FROM phone_numbers WHERE phone_number = $1 AND is_active)"

AGENT_EXISTS = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND deleted_at IS NULL)"

# KEY SHARE: a deletion of the agent (FOR UPDATE) either sees this assignment or makes it wait
# and find the agent gone.
LOCK_AGENT = "SELECT id FROM agents WHERE id = $1 AND deleted_at IS NULL FOR KEY SHARE"

INSERT_PURCHASED = """
INSERT INTO phone_numbers
    (phone_number, purchased, purchased_at, next_billing_date, provider, provider_ref)
VALUES ($1, true, now(), now() + interval '1 month', $2, $3)
RETURNING id, next_billing_date
"""

INSERT_IMPORTED = """
INSERT INTO phone_numbers (phone_number, purchased, provider, provider_ref)
VALUES ($1, false, $2, $3)
RETURNING id
"""

ASSIGN = """
UPDATE phone_numbers
SET agent_id = $2, dispatch_rule_id = $3, assigned_at = now(), updated_at = now()
WHERE id = $1
"""

UNASSIGN = """
UPDATE phone_numbers
SET agent_id = NULL, dispatch_rule_id = NULL, assigned_at = NULL, updated_at = now()
WHERE id = $1
"""

# CONTRACT 9: a repeated unassign.
ALREADY_UNASSIGNED: dict[str, Any] = {
    "already_unassigned": True,
    "agent_id": None,
    "dispatch_rule_deleted": False,
}

RELEASE = """
UPDATE phone_numbers
SET is_active = false, agent_id = NULL, dispatch_rule_id = NULL, next_billing_date = NULL,
    released_at = now(), updated_at = now()
WHERE id = $1
"""

LEAVE_POOLS = "DELETE FROM number_pool_members WHERE phone_number_id = $1"

LOCK_RENEWAL = """
SELECT phone_number, next_billing_date FROM phone_numbers
WHERE id = $1 AND is_active AND purchased AND next_billing_date IS NOT NULL
FOR UPDATE
"""

ADVANCE_BILLING = """
UPDATE phone_numbers
SET next_billing_date = next_billing_date + interval '1 month', updated_at = now()
WHERE id = $1
RETURNING next_billing_date
"""

SELECT_SUB_ACCOUNT = "SELECT id FROM control.sub_accounts WHERE id = $1"

SELECT_BALANCE = "SELECT balance FROM wallet WHERE id = 1"


# --- shared helpers ---------------------------------------------------------------------------


def provider_timeout() -> float:
    """Seconds a request waits for provider work (SWITCHBOARD_TELEPHONY_TIMEOUT_SECONDS)."""
    return float(os.environ.get("SWITCHBOARD_TELEPHONY_TIMEOUT_SECONDS", "15"))


def valid_phone(value: str) -> bool:
    if not E164.fullmatch(value):
        return False
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(value))
    except phonenumbers.NumberParseException:
        return False


async def _exists(scope: TenantScope) -> None:
    """404 when the sub-account a provisioning job names is gone (jobs get ids)."""
    await fetch_one_or_404(scope.pool, SELECT_SUB_ACCOUNT, scope.sub_account_id, what="sub-account")


def provider_failed(exc: TelephonyError) -> APIError:
    log.warning("telephony provider failed: %s", exc)
    return APIError(502, "provider_error", f"the telephony provider failed: {exc}")


def _check_deadline(deadline: float) -> None:
    if time.time() > deadline:
        raise APIError(502, "provider_error", "the telephony provider did not answer in time")


async def run_provider_job(arq: Any, function: str, *args: Any) -> dict[str, Any]:
    """Enqueue provider work and wait for it; its refusal is re-raised, a timeout is 502."""
    timeout = provider_timeout()
    deadline = time.time() + max(timeout - 2.0, timeout / 2)
    job = await arq.enqueue_job(
        function,
        *args,
        deadline,
        _job_id=f"{function}:{uuid.uuid4().hex}",
        _expires=timedelta(seconds=timeout),
    )
    try:
        outcome: dict[str, Any] = await job.result(timeout=timeout, poll_delay=0.05)
    except Exception as exc:  # timed out, or the job itself crashed
        log.warning("%s did not finish: %s", function, type(exc).__name__)
        raise APIError(
            502, "provider_error", "the telephony provider did not answer in time"
        ) from None
    error = outcome.get("error")
    if error is not None:
        raise APIError(error["status"], error["code"], error["message"])
    return outcome


# --- reads ------------------------------------------------------------------------------------


async def list_numbers(scope: TenantScope) -> list[dict[str, Any]]:
    async with scope.transaction() as conn:
        return [dict(row) for row in await conn.fetch(SELECT_NUMBERS)]


async def get_number(scope: TenantScope, number_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_NUMBER, number_id, what="phone number")
    return dict(row)


# --- requests ---------------------------------------------------------------------------------


async def purchase(scope: TenantScope, arq: Any, area_code: str | None) -> dict[str, Any]:
    cost = await wallet.plan_price(scope, "phone_number_monthly")
    if cost > 0:
        async with scope.transaction() as conn:
            balance = await conn.fetchval(SELECT_BALANCE)
        if balance < cost:
            await wallet.record_declined(
                scope, cost, "phone_number", "phone number purchase", "phone_number", None
            )
            raise APIError(
                402,
                "insufficient_funds",
                "the wallet balance cannot cover the number's first month",
            )
    outcome = await run_provider_job(
        arq, "purchase_phone_number", str(scope.sub_account_id), area_code
    )
    return await get_number(scope, uuid.UUID(outcome["phone_number_id"]))


async def import_number(scope: TenantScope, arq: Any, phone_number: str) -> dict[str, Any]:
    phone_number = phone_number.strip(" ")
    if not valid_phone(phone_number):
        raise APIError(
            400,
            "validation_error",
            "phone_number must be a valid E.164 number",
            details=[
                {"field": "phone_number", "message": "not a valid E.164 number", "type": "e164"}
            ],
        )
    async with scope.transaction() as conn:
        if await conn.fetchval(NUMBER_HELD, phone_number):
            raise _number_exists()
        if await phone_directory.holder(conn, phone_number) is not None:
            raise _number_held_elsewhere()
    outcome = await run_provider_job(
        arq, "import_phone_number", str(scope.sub_account_id), phone_number
    )
    return await get_number(scope, uuid.UUID(outcome["phone_number_id"]))


async def assign(
    scope: TenantScope, arq: Any, number_id: uuid.UUID, agent_id: uuid.UUID
) -> dict[str, Any]:
    number = await get_number(scope, number_id)
    async with scope.transaction() as conn:
        if not await conn.fetchval(AGENT_EXISTS, agent_id):
            raise not_found("agent")
    if number["agent_id"] == agent_id:
        return _assigned(number, agent_id, already=True)
    if number["agent_id"] is not None:
        raise _assigned_elsewhere()
    outcome = await run_provider_job(
        arq, "assign_phone_number", str(scope.sub_account_id), str(number_id), str(agent_id)
    )
    return _assigned(number, agent_id, already=outcome["already_assigned"])


async def unassign(scope: TenantScope, arq: Any, number_id: uuid.UUID) -> dict[str, Any]:
    """Take the number from its agent (the provider's routing first); a number with no agent
    is answered at once as already unassigned."""
    number = await get_number(scope, number_id)
    outcome = dict(ALREADY_UNASSIGNED)
    if number["agent_id"] is not None:
        outcome = await run_provider_job(
            arq, "unassign_phone_number", str(scope.sub_account_id), str(number_id)
        )
    return {
        "unassigned": True,
        "phone_number_id": number["id"],
        "phone_number": number["phone_number"],
        **outcome,
    }


async def release(scope: TenantScope, arq: Any, number_id: uuid.UUID) -> dict[str, Any]:
    await get_number(scope, number_id)
    return await run_provider_job(
        arq, "release_phone_number", str(scope.sub_account_id), str(number_id)
    )


def _assigned(number: dict[str, Any], agent_id: uuid.UUID, *, already: bool) -> dict[str, Any]:
    return {
        "assigned": True,
        "phone_number_id": number["id"],
        "phone_number": number["phone_number"],
        "agent_id": agent_id,
        "already_assigned": already,
    }


def _assigned_elsewhere() -> APIError:
    return APIError(
        409,
        "phone_number_assigned_elsewhere",
        "the number is assigned to a different agent; unassign it first",
    )


def _number_exists() -> APIError:
    return APIError(409, "phone_number_exists", "this sub-account already holds that number")


def _number_held_elsewhere() -> APIError:
    return APIError(409, "phone_number_exists", "another sub-account holds that number")


async def _claim(
    conn: asyncpg.Connection, phone_number: str, sub_account_id: uuid.UUID, number_id: uuid.UUID
) -> None:
    """Enter the number in the platform-wide directory, or refuse (the transaction rolls back)."""
    if not await phone_directory.claim(conn, phone_number, sub_account_id, number_id):
        raise _number_held_elsewhere()


# --- provider work (run by the worker, jobs/telephony.py) -------------------------------------


def _held(row: asyncpg.Record) -> HeldNumber:
    return HeldNumber(
        row["phone_number"], row["provider_ref"], row["purchased"], row["dispatch_rule_id"]
    )


async def _give_back(provider: TelephonyProvider, number: HeldNumber) -> None:
    """Undo provider work whose database change did not happen (best effort, logged)."""
    try:
        await provider.release_number(number)
    except TelephonyError as exc:
        log.error("could not give %s back to the provider: %s", number.phone_number, exc)


async def provision_purchase(
    scope: TenantScope, providers: Providers, area_code: str | None, deadline: float
) -> dict[str, Any]:
    _check_deadline(deadline)
    provider = providers.get()
    await _exists(scope)
    async with scope.transaction() as conn:
        held = frozenset(row["phone_number"] for row in await conn.fetch(SELECT_HELD))
    for attempt in range(1, PURCHASE_ATTEMPTS + 1):
        try:
            return await _purchase_one(scope, provider, area_code, held, deadline)
        except _TakenElsewhere as taken:
            if attempt == PURCHASE_ATTEMPTS:
                raise _number_held_elsewhere() from None
            held |= {taken.phone_number}
    raise AssertionError("unreachable")


class _TakenElsewhere(Exception):
    """The carrier sold a number the directory gives to another sub-account (only a carrier
    that shares its numbers across accounts, like the sandbox, can): it is not released,
    since that would take it from its holder."""

    def __init__(self, phone_number: str) -> None:
        super().__init__(phone_number)
        self.phone_number = phone_number


async def _purchase_one(
    scope: TenantScope,
    provider: TelephonyProvider,
    area_code: str | None,
    held: frozenset[str],
    deadline: float,
) -> dict[str, Any]:
    cost = await wallet.plan_price(scope, "phone_number_monthly")
    try:
        bought = await provider.purchase_number(area_code, held)
    except NoNumbersAvailable as exc:
        raise APIError(409, "no_numbers_available", str(exc)) from None
    number = HeldNumber(bought.phone_number, bought.provider_ref, True, None)
    try:
        async with scope.transaction() as conn:
            row = await conn.fetchrow(
                INSERT_PURCHASED, bought.phone_number, provider.name, bought.provider_ref
            )
            number_id = row["id"]
            if not await phone_directory.claim(
                conn, bought.phone_number, scope.sub_account_id, number_id
            ):
                raise _TakenElsewhere(bought.phone_number)
            await schedule_due(
                conn, scope.sub_account_id, RENEWAL_WORK, number_id, row["next_billing_date"]
            )
            if cost > 0:
                await wallet.debit(
                    conn,
                    cost,
                    "phone_number",
                    f"phone number {bought.phone_number}, first month",
                    "phone_number",
                    number_id,
                )
            _check_deadline(deadline)
    except wallet.InsufficientFunds:
        await _give_back(provider, number)
        await wallet.record_declined(
            scope,
            cost,
            "phone_number",
            f"phone number {bought.phone_number}, first month",
            "phone_number",
            None,
        )
        raise
    except asyncpg.UniqueViolationError:
        await _give_back(provider, number)
        raise APIError(409, "phone_number_exists", "the number was taken meanwhile") from None
    except _TakenElsewhere:
        raise
    except BaseException:
        await _give_back(provider, number)
        raise
    return {"phone_number_id": str(number_id)}


async def provision_import(
    scope: TenantScope, providers: Providers, phone_number: str, deadline: float
) -> dict[str, Any]:
    _check_deadline(deadline)
    provider = providers.get()
    await _exists(scope)
    imported = await provider.import_number(phone_number)
    try:
        async with scope.transaction() as conn:
            number_id = await conn.fetchval(
                INSERT_IMPORTED, phone_number, provider.name, imported.provider_ref
            )
            await _claim(conn, phone_number, scope.sub_account_id, number_id)
            _check_deadline(deadline)
    except asyncpg.UniqueViolationError:
        raise _number_exists() from None
    return {"phone_number_id": str(number_id)}


async def provision_assignment(
    scope: TenantScope,
    providers: Providers,
    number_id: uuid.UUID,
    agent_id: uuid.UUID,
    deadline: float,
) -> dict[str, Any]:
    _check_deadline(deadline)
    await _exists(scope)
    # The row lock serialises assignments of one number across requests and workers.
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, LOCK_NUMBER, number_id, what="phone number")
        await fetch_one_or_404(conn, LOCK_AGENT, agent_id, what="agent")
        if row["agent_id"] == agent_id:
            return {"already_assigned": True}
        if row["agent_id"] is not None:
            raise _assigned_elsewhere()
        provider = providers.get(row["provider"])
        rule_id = await provider.assign_number(_held(row), str(agent_id))
        try:
            _check_deadline(deadline)
            await conn.execute(ASSIGN, number_id, agent_id, rule_id)
        except BaseException:
            await _undo_assignment(provider, row, rule_id)
            raise
    return {"already_assigned": False}


async def _undo_assignment(provider: TelephonyProvider, row: asyncpg.Record, rule_id: str) -> None:
    number = HeldNumber(row["phone_number"], row["provider_ref"], row["purchased"], rule_id)
    try:
        await provider.unassign_number(number)
    except TelephonyError as exc:
        log.error("could not remove the dispatch rule of %s: %s", number.phone_number, exc)


async def provision_unassignment(
    scope: TenantScope, providers: Providers, number_id: uuid.UUID, deadline: float
) -> dict[str, Any]:
    _check_deadline(deadline)
    await _exists(scope)
    # The row lock serialises it with assignments and releases of the number; a provider
    # failure raises before the UPDATE, so the assignment stays as it was.
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, LOCK_NUMBER, number_id, what="phone number")
        if row["agent_id"] is None:
            return dict(ALREADY_UNASSIGNED)
        rule_deleted = await providers.get(row["provider"]).unassign_number(_held(row))
        await conn.execute(UNASSIGN, number_id)
    return {
        "already_unassigned": False,
        "agent_id": str(row["agent_id"]),
        "dispatch_rule_deleted": rule_deleted,
    }


async def provision_release(
    scope: TenantScope, providers: Providers, number_id: uuid.UUID, deadline: float
) -> dict[str, Any]:
    _check_deadline(deadline)
    await _exists(scope)
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, LOCK_NUMBER, number_id, what="phone number")
        # Once the carrier has the number back the release is recorded whatever the time.
        rule_deleted = await providers.get(row["provider"]).release_number(_held(row))
        await conn.execute(RELEASE, number_id)
        await phone_directory.free(conn, row["phone_number"], scope.sub_account_id)
        await conn.execute(LEAVE_POOLS, number_id)
        await cancel_due(conn, RENEWAL_WORK, number_id)
    return {
        "released": True,
        "phone_number_id": str(number_id),
        "phone_number": row["phone_number"],
        "was_purchased": row["purchased"],
        "dispatch_rule_deleted": rule_deleted,
    }


async def renew(scope: TenantScope, number_id: uuid.UUID) -> datetime | None:
    """Charge a purchased number's month when it is due; when to look again (None: released).

    A month the wallet cannot cover is declined in the ledger and tried again a day later; the
    number stays (the spec sets no suspension policy).
    """
    cost = await wallet.plan_price(scope, "phone_number_monthly")
    async with scope.transaction() as conn:
        row = await conn.fetchrow(LOCK_RENEWAL, number_id)
        if row is None:
            return None
        if row["next_billing_date"] > utcnow():
            return row["next_billing_date"]  # type: ignore[no-any-return]
        try:
            if cost > 0:
                await wallet.debit(
                    conn,
                    cost,
                    "phone_number",
                    f"phone number {row['phone_number']}, monthly renewal",
                    "phone_number",
                    number_id,
                )
        except wallet.InsufficientFunds:
            log.warning("renewal of %s declined: wallet too low", row["phone_number"])
            return utcnow() + RENEWAL_RETRY
        return await conn.fetchval(ADVANCE_BILLING, number_id)  # type: ignore[no-any-return]
