"""Soak: a bounded mixed workload over 100 sub-accounts against `switchboard serve` + `worker`.

For BENCH_SOAK_SECONDS (default 300), BENCH_SOAK_CONCURRENCY clients (default 8) create, read and
update contacts, add and remove tags, add notes and create invoices, each client owning its own
share of the sub-accounts so the expected final state of every record is known. Every
acknowledged write is recorded and read back at the end (zero lost writes); every 5xx and every
transport error is counted (must be zero); the RSS of the API and worker processes is sampled
every BENCH_SOAK_SAMPLE_SECONDS (default 5) and must stay within 20 % of its value at the end of
warm-up (the first fifth of the run). Servers are embedded unless DATABASE_URL / REDIS_URL are
set (bench/common.py). Run: `python -m bench.soak`; writes the "Soak" section of bench/RESULTS.md.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import httpx
import psutil
from aiosmtpd.controller import Controller

from bench.common import bench_servers, free_port, serve, summary, write_section
from tenancy.db import create_pool
from tenancy.migrate import upgrade_control
from tenancy.organisations import create_organisation
from tenancy.principals import insert_key
from tenancy.provisioning import NewSubAccount, provision_sub_account
from tenancy.settings import get_settings

SECONDS = float(os.environ.get("BENCH_SOAK_SECONDS", "300"))
CONCURRENCY = int(os.environ.get("BENCH_SOAK_CONCURRENCY", "8"))
SAMPLE_SECONDS = float(os.environ.get("BENCH_SOAK_SAMPLE_SECONDS", "5"))
SUB_ACCOUNTS = int(os.environ.get("BENCH_SOAK_SUB_ACCOUNTS", "100"))
TOLERANCE = 0.20
PREFIX = "/webhooks/inbound"
TAGS = [f"tag{n}" for n in range(20)]
# Operation weights: reads dominate, as in real traffic.
MIX = {
    "create": 12,
    "read": 30,
    "update": 15,
    "tag_add": 12,
    "tag_remove": 6,
    "note": 12,
    "invoice": 6,
    "list": 7,
}


class Sink:
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        return "250 OK"


@dataclass
class ContactState:
    id: str
    email: str
    first_name: str | None = None
    tags: set[str] = field(default_factory=set)
    notes: set[str] = field(default_factory=set)


@dataclass
class Account:
    key: str
    contacts: list[ContactState] = field(default_factory=list)
    invoices: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (contact, notes)


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    operations: Counter[str] = field(default_factory=Counter)
    transport_errors: int = 0
    unexpected: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    acknowledged_writes: int = 0


async def prepare(url: str) -> list[Account]:
    pool = await create_pool(url, min_size=1, max_size=4)
    try:
        organisation_id, _ = await create_organisation(
            pool, "Soak Agency", "white_label", SUB_ACCOUNTS + 10
        )
        accounts = []
        for n in range(SUB_ACCOUNTS):
            created = await provision_sub_account(
                pool,
                organisation_id,
                NewSubAccount(f"owner{n}@soak.example", f"Soak {n}", None, None),
            )
            async with pool.acquire() as conn:
                _, key = await insert_key(
                    conn, "sub_account", organisation_id, created["sub_account_id"]
                )
            accounts.append(Account(key))
        return accounts
    finally:
        await pool.close()


class Client:
    def __init__(self, http: httpx.AsyncClient, tally: Tally) -> None:
        self.http, self.tally = http, tally

    async def call(
        self,
        operation: str,
        account: Account,
        method: str,
        path: str,
        body: Any = None,
        expect: tuple[int, ...] = (200,),
    ) -> dict[str, Any] | None:
        started = time.perf_counter()
        try:
            answer = await self.http.request(
                method, PREFIX + path, json=body, headers={"x-api-key": account.key}
            )
        except httpx.HTTPError as exc:
            self.tally.transport_errors += 1
            self.tally.unexpected.append(f"{operation}: {type(exc).__name__}")
            return None
        self.tally.latencies.append((time.perf_counter() - started) * 1000)
        self.tally.statuses[answer.status_code] += 1
        self.tally.operations[operation] += 1
        if answer.status_code not in expect:
            self.tally.unexpected.append(f"{operation} {answer.status_code} {answer.text[:200]}")
            return None
        return answer.json()  # type: ignore[no-any-return]


async def step(client: Client, account: Account, rng: random.Random) -> None:
    operation = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    if operation != "create" and not account.contacts:
        operation = "create"
    contact = rng.choice(account.contacts) if account.contacts else None
    if operation == "create":
        email = f"c-{uuid.uuid4().hex[:16]}@soak.example"
        answer = await client.call(
            operation, account, "POST", "/contacts", {"email": email}, (201,)
        )
        if answer is not None:
            account.contacts.append(ContactState(str(answer["contact_id"]), email))
            client.tally.acknowledged_writes += 1
    elif operation == "read":
        assert contact is not None
        await client.call(operation, account, "GET", f"/contacts/{contact.id}")
    elif operation == "list":
        await client.call(operation, account, "GET", "/contacts?limit=20")
    elif operation == "update":
        assert contact is not None
        name = f"N{rng.randrange(10**6)}"
        if (
            await client.call(
                operation, account, "PATCH", f"/contacts/{contact.id}", {"first_name": name}
            )
            is not None
        ):
            contact.first_name = name
            client.tally.acknowledged_writes += 1
    elif operation == "tag_add":
        assert contact is not None
        tag = rng.choice(TAGS)
        if (
            await client.call(
                operation, account, "POST", f"/contacts/{contact.id}/tags", {"tags": [tag]}
            )
            is not None
        ):
            contact.tags.add(tag)
            client.tally.acknowledged_writes += 1
    elif operation == "tag_remove":
        assert contact is not None
        tag = rng.choice(sorted(contact.tags)) if contact.tags else rng.choice(TAGS)
        if (
            await client.call(
                operation, account, "DELETE", f"/contacts/{contact.id}/tags", {"tags": [tag]}
            )
            is not None
        ):
            contact.tags.discard(tag)
            client.tally.acknowledged_writes += 1
    elif operation == "note":
        assert contact is not None
        answer = await client.call(
            operation,
            account,
            "POST",
            f"/contacts/{contact.id}/notes",
            {"content": f"note {uuid.uuid4().hex}"},
            (201,),
        )
        if answer is not None:
            contact.notes.add(str(answer["note"]["id"]))
            client.tally.acknowledged_writes += 1
    elif operation == "invoice":
        assert contact is not None
        notes = f"inv {uuid.uuid4().hex[:8]}"
        answer = await client.call(
            operation,
            account,
            "POST",
            "/invoices",
            {
                "contact_id": contact.id,
                "due_date": (date.today() + timedelta(days=30)).isoformat(),
                "items": [{"item": "Service", "quantity": rng.randint(1, 5), "amount": 12.5}],
                "notes": notes,
            },
            (201,),
        )
        if answer is not None:
            account.invoices[str(answer["invoice"]["id"])] = (contact.id, notes)
            client.tally.acknowledged_writes += 1


async def verify(http: httpx.AsyncClient, accounts: list[Account]) -> tuple[int, int, list[str]]:
    """(records checked, lost or wrong, first problems): every acknowledged write read back."""
    checked, lost, problems = 0, 0, []

    def problem(text: str) -> None:
        nonlocal lost
        lost += 1
        if len(problems) < 10:
            problems.append(text)

    for account in accounts:
        headers = {"x-api-key": account.key}
        for contact in account.contacts:
            checked += 1
            answer = await http.get(f"{PREFIX}/contacts/{contact.id}", headers=headers)
            if answer.status_code != 200:
                problem(f"contact {contact.id}: {answer.status_code}")
                continue
            stored = answer.json()["contact"]
            if (stored["email"], stored["first_name"]) != (contact.email, contact.first_name):
                problem(f"contact {contact.id}: {stored['email']} {stored['first_name']}")
            if {tag.lower() for tag in stored["tags"]} != contact.tags:
                problem(f"contact {contact.id} tags {stored['tags']} != {sorted(contact.tags)}")
            if contact.notes:
                notes = await http.get(f"{PREFIX}/contacts/{contact.id}/notes", headers=headers)
                found = {str(note["id"]) for note in notes.json().get("notes", [])}
                if not contact.notes <= found:
                    problem(f"contact {contact.id}: notes missing {contact.notes - found}")
        for invoice_id, (contact_id, notes) in account.invoices.items():
            checked += 1
            answer = await http.get(f"{PREFIX}/invoices/{invoice_id}", headers=headers)
            if answer.status_code != 200:
                problem(f"invoice {invoice_id}: {answer.status_code}")
                continue
            stored = answer.json()["invoice"]
            if (str(stored["contact_id"]), stored.get("notes")) != (contact_id, notes):
                problem(f"invoice {invoice_id}: {stored['contact_id']} {stored.get('notes')}")
    return checked, lost, problems


async def sample_memory(
    processes: dict[str, psutil.Process], samples: dict[str, list[float]], stop: asyncio.Event
) -> None:
    while not stop.is_set():
        for name, process in processes.items():
            samples[name].append(process.memory_info().rss / 2**20)
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)
        except TimeoutError:
            pass


def memory_verdict(series: list[float]) -> tuple[float, float, float, bool]:
    """(RSS at end of warm-up, peak after it, last; MiB) and whether it stayed within 20 %."""
    warm = max(1, len(series) // 5)
    baseline = series[warm - 1]
    after = series[warm - 1 :]
    peak = max(after)
    return baseline, peak, series[-1], peak <= baseline * (1 + TOLERANCE)


async def drive(port: int, accounts: list[Account], pids: dict[str, int]) -> dict[str, Any]:
    tally = Tally()
    processes = {name: psutil.Process(pid) for name, pid in pids.items()}
    samples: dict[str, list[float]] = {name: [] for name in pids}
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=30, limits=limits
    ) as http:
        sampler = asyncio.create_task(sample_memory(processes, samples, stop))
        deadline = time.monotonic() + SECONDS
        started = time.monotonic()

        async def worker(index: int) -> None:
            mine = accounts[index::CONCURRENCY]
            rng = random.Random(index)
            client = Client(http, tally)
            while time.monotonic() < deadline:
                await step(client, rng.choice(mine), rng)

        await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))
        elapsed = time.monotonic() - started
        stop.set()
        await sampler
        checked, lost, problems = await verify(http, accounts)
    return {
        "tally": tally,
        "elapsed": elapsed,
        "samples": samples,
        "checked": checked,
        "lost": lost,
        "problems": problems,
    }


def report(result: dict[str, Any]) -> str:
    tally: Tally = result["tally"]
    total = sum(tally.statuses.values())
    server_errors = sum(count for status, count in tally.statuses.items() if status >= 500)
    latency = summary(tally.latencies) if tally.latencies else {"p50": 0, "p95": 0, "p99": 0}
    lines = [
        f"Mixed workload for {result['elapsed']:.0f} s over {SUB_ACCOUNTS} sub-accounts, "
        f"{CONCURRENCY} concurrent clients (httpx, keep-alive) on loopback against "
        "`switchboard serve` + `switchboard worker` (embedded PostgreSQL and Redis, 2 cores). "
        "Run: `python -m bench.soak` (BENCH_SOAK_SECONDS, BENCH_SOAK_CONCURRENCY).",
        "",
        f"- requests: {total} ({total / result['elapsed']:.0f}/s); latency p50 "
        f"{latency['p50']:.1f} ms, p95 {latency['p95']:.1f} ms, p99 {latency['p99']:.1f} ms",
        "- operations: "
        + ", ".join(f"{name} {count}" for name, count in sorted(tally.operations.items())),
        f"- status codes: {dict(sorted(tally.statuses.items()))}",
        f"- 5xx: {server_errors}; transport errors: {tally.transport_errors}; other unexpected "
        f"answers: {len(tally.unexpected) - tally.transport_errors}",
        f"- acknowledged writes: {tally.acknowledged_writes}; records read back: "
        f"{result['checked']}; lost or wrong: {result['lost']}",
    ]
    flat = True
    for name, series in result["samples"].items():
        baseline, peak, last, ok = memory_verdict(series)
        flat = flat and ok
        lines.append(
            f"- RSS {name}: {baseline:.0f} MiB after warm-up, peak {peak:.0f} MiB, "
            f"last {last:.0f} MiB ({len(series)} samples every {SAMPLE_SECONDS:.0f} s; "
            f"{'flat within 20 %' if ok else 'GREW MORE THAN 20 %'})"
        )
    passed = (
        server_errors == 0
        and tally.transport_errors == 0
        and result["lost"] == 0
        and flat
        and not tally.unexpected
    )
    lines.append(f"- verdict: {'PASS' if passed else 'FAIL'}")
    for text in tally.unexpected[:5] + result["problems"][:5]:
        lines.append(f"  - {text}")
    return "\n".join(lines)


def main() -> int:
    smtp = Controller(Sink(), hostname="127.0.0.1", port=free_port())
    smtp.start()
    try:
        with bench_servers() as (database_url, redis_url, _):
            upgrade_control(database_url)
            # Provisioning here sends the owner's invitation: to the sink, not a default port.
            os.environ.update({"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(smtp.port)})
            get_settings.cache_clear()
            accounts = asyncio.run(prepare(database_url))
            env = {
                **os.environ,
                "DATABASE_URL": database_url,
                "REDIS_URL": redis_url,
                "SMTP_HOST": "127.0.0.1",
                "SMTP_PORT": str(smtp.port),
                "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000",
                "SWITCHBOARD_LOG_FORMAT": "text",
            }
            port = free_port()
            log = tempfile.NamedTemporaryFile(
                prefix="switchboard-soak-worker-", suffix=".log", delete=False
            )
            worker = subprocess.Popen(
                [sys.executable, "-m", "cli", "worker"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
            try:
                with serve(env, port) as api:
                    result = asyncio.run(
                        drive(port, accounts, {"api": api.pid, "worker": worker.pid})
                    )
            finally:
                worker.terminate()
                worker.wait(60)
                log.close()
    finally:
        smtp.stop()
    body = report(result)
    print(body)
    write_section("Soak", body)
    return 0 if "verdict: PASS" in body else 1


if __name__ == "__main__":
    raise SystemExit(main())
