"""Inbound AI calls (CONTRACT 6 "Inbound"): a number assigned to an agent answers with it.

A call to one of our numbers becomes a call record (`direction` inbound) of the number's agent;
a caller we do not know becomes a contact with `lead_source` inbound_call. The carrier then
connects the caller to the voice runtime, which records the call's end as it does an outbound
one (`service.finish_call`), and the worker follows it meanwhile (`service.advance_call`):

- the sandbox carrier's call is written `queued`, so the worker connects it as it places an
  outbound call, the caller playing the script of its own number;
- a sandbox webhook may name the carrier's `call_sid`: a repeat of it within CALL_SID_MEMORY
  rings nothing and answers the first call (see `ring_sandbox`);
- a Twilio call is already on the line when its voice webhook arrives: written with its
  CallSid, `ringing` when the sub-account has a free place (max_concurrent_calls), so the worker
  only follows it; else `queued` and held on the line (`waiting`): Twilio is told to ask again
  shortly, and the call is connected on the first ask that finds its place free, in the same
  order as queued outbound calls. A caller who gives up waiting ends `failed`, `no_answer`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from itertools import count

import asyncpg

from api.calls import queries
from api.calls.service import CALL_WORK, place_free
from api.contacts.service import contact_by_phone, emit_created
from tenancy import phone_directory
from tenancy.clock import utcnow
from tenancy.db import fetch_one_or_404
from tenancy.due import schedule_due
from tenancy.errors import APIError
from tenancy.scope import TenantScope

log = logging.getLogger("switchboard.calls.inbound")

# A call already on the line is first looked at by the worker this much later.
FOLLOW_AFTER = timedelta(seconds=1)
# A sandbox call_sid is remembered this long per sub-account (CONTRACT 11a).
CALL_SID_MEMORY = timedelta(hours=24)
# The name-based (version 5) ids of the calls a sandbox call_sid rings are made in this space.
CALL_SID_NAMESPACE = uuid.UUID("5d0f6c1e-3b7a-4a59-9d51-8f1c2e7b4a60")


@dataclass(frozen=True)
class InboundCall:
    sub_account_id: uuid.UUID
    call_id: uuid.UUID
    contact_id: uuid.UUID
    # On the line but held: the sub-account has no free place for it yet.
    waiting: bool = False


@dataclass(frozen=True)
class Ringing:
    """One call to our number: who rang, which number, through which carrier."""

    from_number: str
    to_number: str
    provider: str
    provider_call_id: str | None = None


async def ring_sandbox(
    scope: TenantScope, from_number: str, to_number: str, call_sid: str | None = None
) -> InboundCall:
    """The sandbox rings `to_number` of the sub-account with a call from `from_number`.

    404 when the sub-account does not hold `to_number`, 409 `phone_number_unassigned` when no
    agent answers it, 409 `agent_inactive` when its agent takes no calls.

    With a `call_sid`, a repeat within CALL_SID_MEMORY of a ring that made a call rings nothing
    and answers that call, whatever its numbers. The call_sid is remembered in the call's id:
    the calls one call_sid rings have the name-based ids `sid_call_ids` lists (one per time it
    rang anew), so no column holds it. `provider_call_id` cannot: on a queued call it means a
    Twilio caller held on the line, and placing the call overwrites it with the sandbox's own
    id. A transaction lock on the call_sid makes concurrent repeats wait for the first, which
    they then find."""
    ringing = Ringing(from_number, to_number, "sandbox")
    async with scope.transaction() as conn:
        if call_sid is None:
            return await _record(conn, scope.sub_account_id, ringing)
        await conn.execute(
            queries.LOCK_CALL_SID, f"sandbox-call-sid:{scope.sub_account_id}:{call_sid}"
        )
        call_ids = sid_call_ids(scope.sub_account_id, call_sid)
        while True:
            call_id = next(call_ids)
            rung = await conn.fetchrow(queries.SELECT_CALL_SID_CALL, call_id, CALL_SID_MEMORY)
            if rung is None:
                return await _record(conn, scope.sub_account_id, ringing, call_id)
            if rung["remembered"]:
                return InboundCall(scope.sub_account_id, rung["id"], rung["contact_id"])


def sid_call_ids(sub_account_id: uuid.UUID, call_sid: str) -> Iterator[uuid.UUID]:
    """The ids of the calls `call_sid` rings in the sub-account, in order: the first ring
    takes the first; a ring after the latest call's CALL_SID_MEMORY took the next one."""
    for generation in count():
        yield uuid.uuid5(CALL_SID_NAMESPACE, f"{sub_account_id}/{call_sid}/{generation}")


async def answer_twilio(
    pool: asyncpg.Pool, ringing: Ringing, agent_id: uuid.UUID | None
) -> InboundCall | None:
    """Twilio's voice webhook for one of our numbers (whose VoiceUrl names `agent_id`): the
    call it rings, recorded once per CallSid (a retried webhook finds the same call); None when
    no agent answers the number."""
    owner = await number_owner(pool, ringing.to_number, agent_id)
    if owner is None:
        return None
    sub_account_id = owner.sub_account_id
    async with owner.transaction() as conn:
        known = await conn.fetchrow(
            queries.SELECT_CALL_BY_PROVIDER_ID, ringing.provider, ringing.provider_call_id
        )
        if known is not None:
            waiting = known["status"] == "queued" and not await _connect_held(
                conn, sub_account_id, known["id"]
            )
            return InboundCall(sub_account_id, known["id"], known["contact_id"], waiting)
        try:
            return await _record(conn, sub_account_id, ringing)
        except APIError as exc:
            log.info("inbound call to %s not answered: %s", ringing.to_number, exc.code)
            return None


async def number_owner(
    pool: asyncpg.Pool, phone_number: str, agent_id: uuid.UUID | None
) -> TenantScope | None:
    """The active sub-account holding `phone_number` (the platform-wide number directory,
    CONTRACT 9), as its scope; None when none does, or when the number is not assigned to
    `agent_id` (the agent its VoiceUrl names, when given)."""
    holder = await phone_directory.holder(pool, phone_number)
    if holder is None or not holder.active:
        return None
    owner = holder.scope(pool)
    if agent_id is not None:
        async with owner.transaction() as conn:
            held = await conn.fetchrow(queries.SELECT_HELD_NUMBER, phone_number)
        if held is None or held["agent_id"] != agent_id:
            return None
    return owner


async def _record(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    ringing: Ringing,
    call_id: uuid.UUID | None = None,
) -> InboundCall:
    number = await fetch_one_or_404(
        conn, queries.SELECT_NUMBER_AND_AGENT, ringing.to_number, what="phone number"
    )
    if number["agent_id"] is None:
        raise APIError(
            409,
            "phone_number_unassigned",
            "the number is not assigned to an agent, so no one answers it",
        )
    if (
        not number["agent_active"]
        or await conn.fetchval(queries.LOCK_AGENT, number["agent_id"]) is None
    ):
        raise APIError(409, "agent_inactive", "the number's agent is inactive and takes no calls")
    contact_id, new_contact = await contact_by_phone(conn, ringing.from_number, "inbound_call")
    on_the_line = ringing.provider_call_id is not None
    call_id = await conn.fetchval(
        queries.INSERT_INBOUND_CALL,
        contact_id,
        number["agent_id"],
        number["id"],
        ringing.from_number,
        ringing.to_number,
        ringing.provider,
        "queued",
        ringing.provider_call_id,
        None,
        call_id,
    )
    waiting = on_the_line and not await _connect_held(conn, sub_account_id, call_id)
    await schedule_due(
        conn,
        sub_account_id,
        CALL_WORK,
        call_id,
        utcnow() + (FOLLOW_AFTER if on_the_line else timedelta(0)),
    )
    # Events last: emitting holds the tenant's event stream until commit (api/events.py), and
    # place_free above may wait for the sub-account's call lock.
    if new_contact:
        await emit_created(conn, sub_account_id, contact_id)
    return InboundCall(sub_account_id, call_id, contact_id, waiting)


async def _connect_held(
    conn: asyncpg.Connection, sub_account_id: uuid.UUID, call_id: uuid.UUID
) -> bool:
    """Whether the queued call on the line takes a free place now (then it is `ringing`)."""
    call = await conn.fetchrow(queries.SELECT_QUEUED_CALL, call_id)
    if call is None or not await place_free(conn, sub_account_id, call):
        return False
    await conn.execute(queries.MARK_CONNECTED, call_id)
    return True
