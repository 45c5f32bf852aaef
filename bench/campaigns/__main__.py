"""A 10,000-recipient email campaign against a local SMTP sink, end to end.

The real API (`switchboard serve`) creates a smart list and a campaign and schedules it a few
seconds ahead; the real worker (`switchboard worker`) sends it at start_date. Measured: time from
start_date to completed (both stamped by the database) and messages per second. Proven in the same
run: the sink got exactly one message per recipient, with that recipient's stable Message-ID, and
the wallet ledger holds exactly one posted charge per recipient.

Baseline in the same run: one ready-made message pushed the same number of times straight into
the same sink with aiosmtplib over the same number of connections, from a process of its own: no
rendering, no database, no queue.
Run: `python -m bench.campaigns` (BENCH_CAMPAIGN_RECIPIENTS, default 10000); its `call` mode
(`python -m bench.campaigns call`, bench/campaigns/calls.py) runs a call campaign instead.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from decimal import Decimal
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from typing import Any

import aiosmtplib
import httpx
from aiosmtpd.controller import Controller

from bench.common import bench_servers, free_port, serve, write_section
from tenancy.db import create_pool, tenant_transaction
from tenancy.migrate import upgrade_control
from tenancy.organisations import create_organisation
from tenancy.principals import insert_key
from tenancy.provisioning import NewSubAccount, provision_sub_account

RECIPIENTS = int(os.environ.get("BENCH_CAMPAIGN_RECIPIENTS", "10000"))
CONCURRENCY = int(os.environ.get("SWITCHBOARD_CAMPAIGN_CONCURRENCY", "8"))
BATCH = int(os.environ.get("SWITCHBOARD_CAMPAIGN_BATCH_SIZE", "10"))
PRICE = Decimal("0.01")
TARGET_SECONDS = 60
HTML = (
    "<html><body><h1>Spring sale</h1><p>Everything is <b>20% off</b> this week. "
    '<a href="https://shop.example.com/sale?utm=bench">Shop now</a> or '
    '<a href="https://shop.example.com/faq">read the FAQ</a>.</p></body></html>'
)


class Sink:
    """Counts what it accepts: recipients and Message-IDs (headers only are parsed)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.recipients: Counter[str] = Counter()
        self.message_ids: dict[str, set[str]] = {}
        self.parser = BytesHeaderParser()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        headers = self.parser.parsebytes(envelope.original_content)
        with self.lock:
            for rcpt in envelope.rcpt_tos:
                self.recipients[rcpt] += 1
                self.message_ids.setdefault(rcpt, set()).add(str(headers["Message-ID"]))
        return "250 OK"

    @property
    def total(self) -> int:
        return sum(self.recipients.values())


@contextmanager
def worker(env: dict[str, str]) -> Any:
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "worker"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(30)


async def prepare(url: str) -> tuple[uuid.UUID, str, str]:
    """A sub-account with its key, the email price, a funded wallet and the contacts."""
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        organisation_id, _ = await create_organisation(pool, "Bench Agency")
        created = await provision_sub_account(
            pool, organisation_id, NewSubAccount("owner@bench.example", "Bench", None, None)
        )
        sub_account_id = created["sub_account_id"]
        async with pool.acquire() as conn:
            _, key = await insert_key(conn, "sub_account", organisation_id, sub_account_id)
            await conn.execute(
                "UPDATE control.sub_accounts SET rebilling = $2 WHERE id = $1",
                sub_account_id,
                {"email_per_message": float(PRICE)},
            )
        schema = f"t_{sub_account_id.hex}"
        async with tenant_transaction(pool, schema) as conn:
            await conn.execute(
                "INSERT INTO contacts (name, email, tags) "
                "SELECT 'Reader ' || n, 'reader' || n || '@bench.example', ARRAY['bench'] "
                "FROM generate_series(1, $1) AS n",
                RECIPIENTS,
            )
            await conn.execute(
                "UPDATE wallet SET balance = $1 WHERE id = 1", PRICE * RECIPIENTS + 100
            )
    finally:
        await pool.close()
    return sub_account_id, schema, key


async def proof(url: str, schema: str, campaign_id: uuid.UUID) -> dict[str, Any]:
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        async with tenant_transaction(pool, schema) as conn:
            timing = await conn.fetchrow(
                "SELECT start_date, started_at, completed_at, status FROM campaigns WHERE id = $1",
                campaign_id,
            )
            states = dict(
                await conn.fetch(
                    "SELECT state, count(*) FROM campaign_recipients WHERE campaign_id = $1 "
                    "GROUP BY state",
                    campaign_id,
                )
            )
            charges = await conn.fetchrow(
                "SELECT count(*) AS posted, count(DISTINCT reference_id) AS recipients, "
                "COALESCE(sum(amount), 0) AS total FROM wallet_transactions "
                "WHERE reference_type = 'campaign_recipient' AND status = 'posted'"
            )
            expected = {
                row["email"]: f"<{campaign_id}.{row['contact_id']}@switchboard>"
                for row in await conn.fetch(
                    "SELECT c.email, r.contact_id FROM campaign_recipients AS r "
                    "JOIN contacts AS c ON c.id = r.contact_id WHERE r.campaign_id = $1",
                    campaign_id,
                )
            }
    finally:
        await pool.close()
    return {"timing": timing, "states": states, "charges": charges, "expected": expected}


async def baseline(host: str, port: int, count: int, connections: int) -> float:
    """Seconds to push `count` ready-made messages into the sink over `connections` connections."""
    message = EmailMessage()
    message["From"], message["Subject"] = "bench@bench.example", "Spring sale"
    message.set_content("Spring sale")
    message.add_alternative(HTML, subtype="html")
    data = message.as_bytes()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)

    async def push() -> None:
        client = aiosmtplib.SMTP(hostname=host, port=port, start_tls=False)
        await client.connect()
        while not queue.empty():
            n = queue.get_nowait()
            await client.sendmail("bench@bench.example", [f"base{n}@bench.example"], data)
        await client.quit()

    started = time.perf_counter()
    await asyncio.gather(*(push() for _ in range(connections)))
    return time.perf_counter() - started


def run_baseline(port: int) -> float:
    """The baseline in a process of its own, as the worker is (not sharing the sink's GIL)."""
    output = subprocess.run(
        [sys.executable, "-m", "bench.campaigns", "baseline", str(port)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(output.strip().splitlines()[-1])


def main() -> None:
    load = os.getloadavg()[0]
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)
        sub_account_id, schema, key = asyncio.run(prepare(url))
        sink = Sink()
        smtp = Controller(sink, hostname="127.0.0.1", port=free_port())
        smtp.start()
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(smtp.port),
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000",
        }
        with (
            serve(env, port),
            worker(env),
            httpx.Client(
                base_url=f"http://127.0.0.1:{port}/webhooks/inbound",
                headers={"x-api-key": key},
                timeout=30,
            ) as client,
        ):
            time.sleep(5)  # the worker's due-work listener is up (else the 5 s sweeper finds it)
            response = client.post("/smart-lists", json={"name": "Bench", "tags": ["bench"]})
            assert response.status_code == 201, response.text
            response = client.post(
                "/campaigns",
                json={
                    "name": "Bench",
                    "campaign_type": "email",
                    "subject": "Spring sale",
                    "message_content": HTML,
                    "smart_list_id": response.json()["smart_list"]["id"],
                },
            )
            assert response.status_code == 201, response.text
            campaign_id = uuid.UUID(response.json()["campaign"]["id"])
            start = time.time() + 3
            start_iso = (
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start))
                + f".{int(start % 1 * 1000):03d}Z"
            )
            response = client.post(
                f"/campaigns/{campaign_id}/schedule", json={"start_date": start_iso}
            )
            assert response.status_code == 200, response.text
            deadline = time.monotonic() + 600
            while True:
                campaign = client.get(f"/campaigns/{campaign_id}").json()["campaign"]
                if campaign["status"] in ("completed", "paused", "failed"):
                    break
                assert time.monotonic() < deadline, campaign
                time.sleep(0.5)
        result = asyncio.run(proof(url, schema, campaign_id))
        sink_counts = dict(sink.recipients)
        sink_ids = {rcpt: set(ids) for rcpt, ids in sink.message_ids.items()}
        base_seconds = run_baseline(smtp.port)
        smtp.stop()
    report(campaign, result, sink_counts, sink_ids, base_seconds, load)


def report(
    campaign: dict[str, Any],
    result: dict[str, Any],
    sink_counts: dict[str, int],
    sink_ids: dict[str, set[str]],
    base_seconds: float,
    load: float,
) -> None:
    timing, charges, expected = result["timing"], result["charges"], result["expected"]
    seconds = (timing["completed_at"] - timing["start_date"]).total_seconds()
    sending = (timing["completed_at"] - timing["started_at"]).total_seconds()
    rate = RECIPIENTS / seconds
    base_rate = RECIPIENTS / base_seconds
    once = (
        len(expected) == RECIPIENTS
        and set(sink_counts) == set(expected)
        and all(count == 1 for count in sink_counts.values())
        and all(sink_ids[rcpt] == {mid} for rcpt, mid in expected.items())
    )
    charged_once = (
        charges["posted"] == RECIPIENTS == charges["recipients"]
        and -charges["total"] == PRICE * RECIPIENTS
    )
    ok = campaign["status"] == "completed" and once and charged_once and seconds < TARGET_SECONDS
    body = (
        f"Command: `python -m bench.campaigns` ({RECIPIENTS} recipients from a smart list, one "
        "email campaign created and scheduled 3 s ahead over HTTP with `switchboard serve`, sent "
        f"by one `switchboard worker` with {CONCURRENCY} SMTP connections and claims of {BATCH} "
        "recipients, into a local aiosmtpd sink; each message is rendered per recipient with "
        "tracked links, an open pixel and an unsubscribe link, charged "
        f"{PRICE} in the transaction that marks it sending, and recorded in the contact's "
        f"conversation). Machine: {os.cpu_count()} cores, 1-minute load average "
        f"{load:.1f} at the start.\n\n"
        "| measure | value |\n|---|---|\n"
        f"| start_date to completed | {seconds:.1f} s |\n"
        f"| first claim to completed | {sending:.1f} s |\n"
        f"| messages per second (from start_date) | {rate:.0f} |\n"
        f"| baseline: one ready-made message pushed with bare aiosmtplib into the same sink "
        f"{RECIPIENTS} times over {CONCURRENCY} connections | "
        f"{base_seconds:.1f} s ({base_rate:.0f} msg/s) |\n"
        f"| campaign status / success / pending | {campaign['status']} / {campaign['success']}"
        f" / {campaign['pending']} |\n"
        f"| messages at the sink / distinct recipients | {sum(sink_counts.values())} / "
        f"{len(sink_counts)} |\n"
        f"| posted charges / distinct recipients charged / total | {charges['posted']} / "
        f"{charges['recipients']} / {-charges['total']} |\n\n"
        f"Ratio service / baseline (time): {seconds / base_seconds:.2f}. "
        f"Each recipient exactly one message with its own stable Message-ID: "
        f"{'yes' if once else 'NO'}; exactly one charge each: {'yes' if charged_once else 'NO'}."
        f" Target under {TARGET_SECONDS} s: {'met' if ok else 'NOT met'}.\n"
    )
    write_section("Campaigns", body)
    print(body)


if __name__ == "__main__":
    if sys.argv[1:2] == ["call"]:
        from bench.campaigns import calls

        calls.main()
    elif sys.argv[1:2] == ["call-worker"]:
        from bench.campaigns import calls

        calls.run_metered_worker(sys.argv[2])
    elif sys.argv[1:2] == ["baseline"]:
        print(asyncio.run(baseline("127.0.0.1", int(sys.argv[2]), RECIPIENTS, CONCURRENCY)))
    else:
        main()
