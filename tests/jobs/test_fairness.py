"""Fairness (CONTRACT 11, 11a): one sub-account's background work never holds up another's, nor
the requests that wait for a job, by more than 10 s; at most 5 deliveries of one subscription (or
one agent's post-call webhook) run at once, and a sub-account's deliveries together at most
SWITCHBOARD_WEBHOOK_SUB_ACCOUNT_CONCURRENCY.

The worker is the real one (every queue), in this process; the receivers are on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from cli.wiring import DELIVERIES_QUEUE, JOBS
from integrations.webhooks import new_secret
from jobs import due
from tests.conftest import running_worker
from tests.factories import (
    assign,
    create_contact,
    emit_event,
    emit_target,
    import_number,
    make_agent,
    make_contact,
    make_tenant,
    subscribe,
)
from tests.helpers import attempts, deliveries, due_rows

BOUND_SECONDS = 10  # CONTRACT 11a: "a few seconds" is at most 10 s
CALLS = "/webhooks/inbound/calls"
NUMBERS = "/webhooks/inbound/phone-numbers"


class HeldReceiver:
    """Accepts each request and answers nothing until `release()` (or, with `hold`, for that many
    seconds), then 200. Counts the requests open at once, per path and in all, and every request
    it received; a request whose sender gave up (closed the connection) is no longer open."""

    def __init__(self, hold: float | None = None) -> None:
        self.hold = hold
        self.released = asyncio.Event()
        self.open: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self.open_all = 0
        self.most_all = 0
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> HeldReceiver:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.released.set()
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 5)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def release(self) -> None:
        self.released.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            path = head.split(" ", 2)[1]
            length = next(
                (
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            writer.close()
            return
        self.received[path] += 1
        self.open[path] += 1
        self.open_all += 1
        self.most[path] = max(self.most[path], self.open[path])
        self.most_all = max(self.most_all, self.open_all)
        gone = asyncio.ensure_future(reader.read(1))  # b"" once the sender closes
        answer = asyncio.ensure_future(
            self.released.wait() if self.hold is None else asyncio.sleep(self.hold)
        )
        try:
            await asyncio.wait({gone, answer}, return_when=asyncio.FIRST_COMPLETED)
            if answer.done() and not gone.done():
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
        finally:
            self.open[path] -= 1
            self.open_all -= 1
            for task in (gone, answer):
                task.cancel()
            writer.close()


@pytest.fixture
async def held() -> AsyncIterator[HeldReceiver]:
    receiver = await HeldReceiver().start()
    yield receiver
    await receiver.stop()


@pytest.fixture
async def start_worker(
    migrated, servers, voice_runtime, worker_env
) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """`await start_worker(**env)`: the real worker, every queue, in this process with these
    settings, until the test ends."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(**env: str) -> Any:
            worker_env(**env)
            return await stack.enter_async_context(running_worker(migrated, servers.redis_url))

        yield start


async def until(check: Callable[[], Awaitable[bool]], seconds: float, what: str) -> float:
    """Seconds until `check()` holds; fails after `seconds`."""
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < seconds, f"{what} not within {seconds} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def test_a_sub_account_flooding_a_receiver_that_never_answers_holds_up_no_other(
    client, pool, tenant, agency_second, receiver, held, start_worker
):
    # The audit's case: B's receiver holds each attempt for the whole webhook timeout (10 s).
    await start_worker()
    # Tenant A: an agent with a number, a contact to call, its own receiver of contact.created.
    agent_id = await make_agent(client, tenant)
    number_id = await import_number(client, tenant, "+14155550123")
    assert (await assign(client, tenant, number_id, agent_id)).status_code == 200
    callee = await make_contact(client, tenant)
    await subscribe(client, tenant, receiver.url(), events=["contact.created"])

    # Tenant B (another organisation): a receiver that never answers, and 100 new contacts.
    flooder = await make_tenant(client, agency_second)
    await subscribe(client, flooder, held.url(), events=["contact.created"])
    for _ in range(100):
        await create_contact(client, flooder)

    async def flood_holds_its_share() -> bool:
        return held.open["/hook"] >= 5

    await until(flood_holds_its_share, BOUND_SECONDS, "B's deliveries in flight")

    # A's webhook arrives.
    await create_contact(client, tenant)

    async def a_webhook_arrived() -> bool:
        return len(receiver.to("/hook")) >= 1

    await until(a_webhook_arrived, BOUND_SECONDS, "tenant A's webhook")
    assert receiver.to("/hook")[0].json()["type"] == "contact.created"

    # A's outbound call starts (leaves `queued`).
    response = await client.post(
        f"/webhooks/inbound/contacts/{callee}/call",
        json={"agent_id": agent_id},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    call_id = (await response.get_json())["call_id"]

    async def call_started() -> bool:
        answer = await client.get(f"{CALLS}/{call_id}", headers=tenant.headers)
        return (await answer.get_json())["call"]["status"] != "queued"

    await until(call_started, BOUND_SECONDS, "tenant A's call leaving queued")

    # A's number purchase (a request that waits for a provider job) answers in time.
    started = time.monotonic()
    response = await client.post(f"{NUMBERS}/purchase", headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    assert time.monotonic() - started < BOUND_SECONDS

    # All the while, at most 5 of B's deliveries were in flight at once.
    assert held.most["/hook"] == 5

    # None of B's deliveries is lost: once the receiver answers, every one is delivered, each
    # with a log of real attempts only (numbered from 1, no gap).
    held.release()

    async def all_delivered() -> bool:
        rows = await deliveries(pool, flooder)
        return len(rows) == 100 and all(row["status"] == "delivered" for row in rows)

    await until(all_delivered, 60, "every delivery of B")
    assert held.most["/hook"] == 5
    for row in await deliveries(pool, flooder):
        logged = await attempts(pool, flooder, row["id"])
        assert [a["attempt_number"] for a in logged] == list(range(1, row["attempt_count"] + 1))
        assert all(a["error"] == "timeout" for a in logged[:-1])
        assert logged[-1]["status_code"] == 200


async def test_deliveries_waiting_for_a_slot_are_no_attempts(client, pool, tenant, start_worker):
    """30 deliveries to one subscription whose receiver takes 0.5 s each: 5 go at once, the
    others wait their turn without an attempt logged or a retry delay taken."""
    slow = await HeldReceiver(hold=0.5).start()
    try:
        await start_worker()
        await subscribe(client, tenant, slow.url())
        for _ in range(30):
            await emit_event(pool, tenant)

        async def all_delivered() -> bool:
            rows = await deliveries(pool, tenant)
            return len(rows) == 30 and all(row["status"] == "delivered" for row in rows)

        await until(all_delivered, 30, "every delivery")
        assert slow.most["/hook"] == 5
        assert slow.received["/hook"] == 30
        for row in await deliveries(pool, tenant):
            assert row["attempt_count"] == 1
            assert [a["status_code"] for a in await attempts(pool, tenant, row["id"])] == [200]
    finally:
        await slow.stop()


async def test_an_agents_post_call_webhook_target_gets_5_at_once(
    client, pool, tenant, start_worker
):
    slow = await HeldReceiver(hold=0.5).start()
    try:
        await start_worker()
        secret = new_secret()
        for _ in range(12):
            await emit_target(pool, tenant, slow.url("/post-call"), secret, {"call": {}})

        async def all_delivered() -> bool:
            rows = await deliveries(pool, tenant)
            return len(rows) == 12 and all(row["status"] == "delivered" for row in rows)

        await until(all_delivered, 30, "every post-call delivery")
        assert slow.most["/post-call"] == 5
    finally:
        await slow.stop()


async def test_one_sub_accounts_deliveries_share_its_cap(client, pool, tenant, start_worker):
    slow = await HeldReceiver(hold=0.5).start()
    try:
        await start_worker(SWITCHBOARD_WEBHOOK_SUB_ACCOUNT_CONCURRENCY="3")
        await subscribe(client, tenant, slow.url("/a"))
        await subscribe(client, tenant, slow.url("/b"))
        for _ in range(6):
            await emit_event(pool, tenant)  # one delivery to each subscription

        async def all_delivered() -> bool:
            rows = await deliveries(pool, tenant)
            return len(rows) == 12 and all(row["status"] == "delivered" for row in rows)

        await until(all_delivered, 30, "every delivery")
        assert slow.most_all == 3
        assert slow.received == Counter({"/a": 6, "/b": 6})
    finally:
        await slow.stop()


async def test_each_kind_of_due_work_is_queued_on_its_queue(client, pool, tenant, app, servers):
    """The sweeper and the listener put a delivery's run on the deliveries queue, not behind
    (or in front of) the provider jobs of the default queue."""
    arq = app.app.config["ARQ"]
    ctx = {
        "db": pool,
        "redis": arq,
        "database_url": servers.database_url,
        "due_handlers": due.handlers_by_kind(JOBS.due_handlers),
    }
    await subscribe(client, tenant, "http://127.0.0.1:9/hook")
    await due.start_listener(ctx)
    try:
        await emit_event(pool, tenant)  # the listener hears the commit
        [delivery] = await deliveries(pool, tenant)
        [row] = await due_rows(pool, [delivery["id"]])
        job_id = due.job_id(row["id"], row["version"])

        async def queued_on_deliveries() -> bool:
            return await arq.zscore(DELIVERIES_QUEUE, job_id) is not None

        await until(queued_on_deliveries, BOUND_SECONDS, "the listener's job")
    finally:
        await due.stop_listener(ctx)
    assert await arq.zscore(due.DEFAULT_QUEUE, job_id) is None
    await arq.zrem(DELIVERIES_QUEUE, job_id)
    await arq.delete(f"arq:job:{job_id}")
    assert await due.sweep_due(ctx) >= 1
    assert await arq.zscore(DELIVERIES_QUEUE, job_id) is not None
    assert await arq.zscore(due.DEFAULT_QUEUE, job_id) is None
