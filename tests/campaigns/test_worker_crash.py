"""A `switchboard worker` killed mid-campaign, then another started: nobody twice, nobody missed.

The SMTP server here accepts the first messages, then holds every further message unanswered
(as a slow provider would), so the kill lands while senders are mid-send with recipients claimed
and charged, and never between the provider accepting a message and our recording it (the one
window CONTRACT.md section 3 leaves to the stable Message-ID). Held messages are never accepted.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest

from tenancy.db import tenant_transaction
from tenancy.embedded import free_port
from tests.factories import add_contact, create_campaign, credit
from tests.helpers import (
    get_campaign,
    ledger,
    recipients,
    schedule,
    soon,
    wait_for_status,
    worker_process,
)

ACCEPT_FIRST = 10
RECIPIENTS = 30


@dataclass
class GatedSink:
    host: str
    port: int
    accept_first: int
    accepted: list[tuple[list[str], Message]] = field(default_factory=list)
    held: int = 0
    opened: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        with self.lock:
            hold = not self.opened.is_set() and len(self.accepted) >= self.accept_first
            if not hold:
                self.accepted.append(
                    (list(envelope.rcpt_tos), message_from_bytes(envelope.original_content))
                )
            else:
                self.held += 1
        if not hold:
            return "250 Message accepted for delivery"
        await asyncio.to_thread(self.opened.wait)
        return "451 4.3.0 Try again later"

    def to(self, address: str) -> list[Message]:
        return [message for rcpt, message in self.accepted if address in rcpt]


@pytest.fixture
def gated_sink() -> Iterator[GatedSink]:
    from aiosmtpd.controller import Controller

    sink = GatedSink("127.0.0.1", free_port(), ACCEPT_FIRST)
    controller = Controller(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        sink.opened.set()
        controller.stop()


def start_worker(sink: GatedSink) -> subprocess.Popen[bytes]:
    return worker_process(
        SMTP_HOST=sink.host,
        SMTP_PORT=str(sink.port),
        SWITCHBOARD_CAMPAIGN_CONCURRENCY="3",
        SWITCHBOARD_CAMPAIGN_BATCH_SIZE="2",
        SWITCHBOARD_CAMPAIGN_SLICE_SECONDS="2",
        SWITCHBOARD_CAMPAIGN_LEASE_SECONDS="3",
    )


async def _sent(pool: Any, tenant: Any, campaign_id: str) -> dict[str, int]:
    async with tenant_transaction(pool, tenant.schema) as conn:
        rows = await conn.fetch(
            "SELECT state, count(*) FROM campaign_recipients WHERE campaign_id = $1 GROUP BY state",
            uuid.UUID(campaign_id),
        )
    return {row["state"]: row["count"] for row in rows}


async def test_worker_killed_mid_campaign_then_restarted_sends_each_recipient_once(
    client, pool, tenant_priced, gated_sink
):
    tenant = tenant_priced
    await credit(client, tenant, 100)
    contacts = [await add_contact(client, tenant) for _ in range(RECIPIENTS)]
    campaign = await create_campaign(client, tenant, contact_ids=contacts)
    first = start_worker(gated_sink)
    second = None
    try:
        assert (await schedule(client, tenant, campaign["id"], soon(1))).status_code == 200
        # Given: the first messages accepted and recorded, the next ones held mid-send.
        async with asyncio.timeout(60):
            while True:
                recorded = (await _sent(pool, tenant, campaign["id"])).get("sent")
                if gated_sink.held >= 1 and recorded == ACCEPT_FIRST:
                    break
                await asyncio.sleep(0.05)
        # When: the worker dies without any chance to clean up.
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        states = await _sent(pool, tenant, campaign["id"])
        assert states.get("sending", 0) >= 1  # claimed and charged, not yet sent
        gated_sink.opened.set()
        second = start_worker(gated_sink)

        done = await wait_for_status(client, tenant, campaign["id"], "completed")
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)

    # Then: every recipient got exactly one message, with its stable Message-ID, and one charge.
    assert (done["success"], done["pending"], done["contacted"]) == (RECIPIENTS, 0, RECIPIENTS)
    rows = await recipients(pool, tenant, campaign["id"])
    assert len(gated_sink.accepted) == RECIPIENTS
    for row in rows:
        (message,) = gated_sink.to(row["email"])
        assert message["Message-ID"] == f"<{campaign['id']}.{row['contact_id']}@switchboard>"
    charges = [row for row in await ledger(pool, tenant) if row["status"] == "posted"]
    assert sorted(row["reference_id"] for row in charges) == sorted(row["id"] for row in rows)
    assert (await get_campaign(client, tenant, campaign["id"]))["status"] == "completed"
