"""Contacts under load: POST /contacts, GET /contacts/{id}, GET /contacts?limit=50, GET /tags.

One sub-account with 5,000 contacts (tags drawn from 60 names, 0 to 5 each). The service
(`switchboard serve`) and the baseline (bench/contacts/baseline.py: a bare ASGI app doing the same
SQL on asyncpg, same server, same pool size) run side by side in the same run; each operation is
driven against each in alternating rounds by a small keep-alive HTTP/1.1 load generator
(asyncio streams; httpx would be the bottleneck). Throughput ratio = service / baseline. A third
target, the baseline with its tenant statements under the benchmark's superuser instead of the
tenant role, shows what row-level security costs in the same run.
GET /tags latency is also measured one request at a time (the target: p50 under 20 ms).
Run: `python -m bench.contacts` (BENCH_CONTACTS_SECONDS per round, BENCH_CONTACTS_CONCURRENCY,
BENCH_CONTACTS_ROUNDS, BENCH_CONTACTS_WORKERS server processes each, and
BENCH_CONTACTS_AUTH_CACHE_SECONDS for both).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from aiosmtpd.controller import Controller

from bench.common import bench_servers, free_port, summary, write_section
from tenancy.db import create_pool, tenant_transaction
from tenancy.migrate import upgrade_control
from tenancy.organisations import create_organisation
from tenancy.principals import insert_key
from tenancy.provisioning import NewSubAccount, provision_sub_account

CONTACTS = 5000
SECONDS = float(os.environ.get("BENCH_CONTACTS_SECONDS", "5"))
CONCURRENCY = int(os.environ.get("BENCH_CONTACTS_CONCURRENCY", "8"))
ROUNDS = int(os.environ.get("BENCH_CONTACTS_ROUNDS", "5"))
# Server processes for the service and for the baseline alike: one per core.
WORKERS = int(os.environ.get("BENCH_CONTACTS_WORKERS", str(os.cpu_count() or 1)))
AUTH_CACHE = os.environ.get("BENCH_CONTACTS_AUTH_CACHE_SECONDS", "2")
SEQUENTIAL_TAGS = 200
PREFIX = "/webhooks/inbound"
TIMEOUT = 30.0


class Sink:
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        return "250 OK"


SEED = """
INSERT INTO contacts (name, first_name, last_name, email, phone, address, tags, created_at)
SELECT 'Person ' || n, 'Person', n::text, 'person' || n || '@bench.example',
       '+1415' || (2000000 + n)::text, n || ' Bench Street',
       ARRAY(SELECT 'tag' || ((n * 7 + k * 13) % 60) FROM generate_series(1, n % 6) AS k),
       now() - (n || ' seconds')::interval
FROM generate_series(1, $1) AS n
"""


async def new_sub_account(pool: Any, name: str) -> tuple[str, str]:
    """(key, tenant schema) of a new sub-account of a new organisation."""
    organisation_id, _ = await create_organisation(pool, f"{name} Agency")
    created = await provision_sub_account(
        pool, organisation_id, NewSubAccount(f"owner@{name.lower()}.example", name, None, None)
    )
    sub_account_id = created["sub_account_id"]
    async with pool.acquire() as conn:
        _, key = await insert_key(conn, "sub_account", organisation_id, sub_account_id)
    return key, f"t_{sub_account_id.hex}"


async def prepare(url: str) -> tuple[str, list[str]]:
    """A sub-account key and the ids of its 5,000 seeded contacts."""
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        key, schema = await new_sub_account(pool, "Bench")
        async with tenant_transaction(pool, schema) as conn:
            await conn.execute(SEED, CONTACTS)
            await conn.execute("ANALYZE contacts")
            ids = [str(row["id"]) for row in await conn.fetch("SELECT id FROM contacts")]
    finally:
        await pool.close()
    return key, ids


# --- load generator -------------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection; just enough of the protocol for these answers."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {self.key}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status, answer, closing = await asyncio.wait_for(self._response(), TIMEOUT)
        if closing:  # hypercorn closes a connection after keep_alive_max_requests (1000)
            self.close()
            self.reader = self.writer = None
        return status, answer

    async def _response(self) -> tuple[int, bytes, bool]:
        assert self.reader is not None
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {
            n.strip().lower(): v.strip()
            for n, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        closing = headers.get("connection", "").lower() == "close"
        return status, await self._body(headers), closing

    async def _body(self, headers: dict[str, str]) -> bytes:
        assert self.reader is not None
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        chunks = b""
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return chunks
            chunks += chunk[:-2]

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


Request = Callable[[int], tuple[str, str, bytes]]


async def load(
    ports: list[int],
    key: str,
    make: Request,
    seconds: float,
    concurrency: int,
    expect: tuple[int, ...],
) -> tuple[float, list[float]]:
    """(requests per second, latencies in ms) of `concurrency` connections for `seconds`,
    spread evenly over the server processes' ports."""
    latencies: list[float] = []
    counter = iter(range(10**9))
    deadline = time.perf_counter() + seconds

    async def run(port: int) -> None:
        connection = Connection(port, key)
        try:
            while time.perf_counter() < deadline:
                method, path, body = make(next(counter))
                started = time.perf_counter()
                status, answer = await connection.request(method, path, body)
                latencies.append((time.perf_counter() - started) * 1000)
                assert status in expect, (status, answer[:300])
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(run(ports[n % len(ports)]) for n in range(concurrency)))
    return len(latencies) / (time.perf_counter() - started), latencies


# --- the run --------------------------------------------------------------------------------


@contextmanager
def server(command: list[str], env: dict[str, str], port: int, log: Path) -> Iterator[int]:
    """A server process until the block ends. Its output goes to a file: a pipe nobody reads
    fills up with the service's access log and then blocks the server."""
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", *command],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"{command} did not start; see {log}") from None
                    time.sleep(0.2)
            yield process.pid
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def start(
    stack: ExitStack,
    env: dict[str, str],
    logs: Path,
    name: str,
    command: Callable[[int], list[str]],
) -> tuple[list[int], list[int]]:
    """WORKERS server processes for one side, each on its own port: (ports, pids).

    Separate ports rather than `switchboard serve --workers` (SO_REUSEPORT), because the kernel
    hashes connections over the processes: 8 connections often split 6:2 or 5:3, leaving one
    process the bottleneck, and the split changed from round to round and side to side. Here
    the load generator gives every process the same number of connections."""
    ports, pids = [], []
    for number in range(WORKERS):
        port = free_port()
        pids.append(
            stack.enter_context(server(command(port), env, port, logs / f"{name}-{number}.log"))
        )
        ports.append(port)
    return ports, pids


def operations(ids: list[str]) -> list[tuple[str, Request, tuple[int, ...]]]:
    def create(n: int) -> tuple[str, str, bytes]:
        body = {
            "email": f"new-{n}-{uuid.uuid4().hex[:12]}@bench.example",
            "first_name": "New",
            "last_name": str(n),
        }
        return "POST", f"{PREFIX}/contacts", json.dumps(body).encode()

    return [
        (
            "GET /contacts/{id}",
            lambda n: ("GET", f"{PREFIX}/contacts/{ids[n * 7919 % len(ids)]}", b""),
            (200,),
        ),
        ("GET /contacts?limit=50", lambda n: ("GET", f"{PREFIX}/contacts?limit=50", b""), (200,)),
        ("GET /tags", lambda n: ("GET", f"{PREFIX}/tags", b""), (200,)),
        ("POST /contacts", create, (201,)),
    ]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by a process and all its descendants (Linux)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
            times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    family, grew = {pid}, True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in family and child not in family:
                family.add(child)
                grew = True
    return sum(times.get(member, 0.0) for member in family)


async def rounds(
    targets: dict[str, tuple[list[int], list[int]]],
    key: str,
    ops: list[tuple[str, Request, tuple[int, ...]]],
    results: dict[str, Any],
) -> None:
    """targets: name -> (the ports, the pids of its server processes)."""
    for ports, _ in targets.values():
        for _, make, expect in ops:
            await load(ports, key, make, 1.0, CONCURRENCY, expect)  # warm pools and caches
    for name, _, _ in ops:
        results[name] = {
            field: [] for target in targets for field in (target, f"{target}_ms", f"{target}_cpu")
        }
    for round_number in range(ROUNDS):
        # Alternate which goes first so drift in machine load hits both alike.
        order = list(targets.items())
        for target, (ports, pids) in order if round_number % 2 == 0 else order[::-1]:
            for name, make, expect in ops:
                print(f"round {round_number + 1}: {name} on the {target}", file=sys.stderr)
                cpu_before = sum(cpu_seconds(pid) for pid in pids)
                rate, latencies = await load(ports, key, make, SECONDS, CONCURRENCY, expect)
                used = sum(cpu_seconds(pid) for pid in pids) - cpu_before
                results[name][target].append(rate)
                results[name][f"{target}_ms"] += latencies
                results[name][f"{target}_cpu"].append(used * 1000 / len(latencies))


async def sequential_tags(port: int, key: str) -> list[float]:
    connection = Connection(port, key)
    timings = []
    try:
        for n in range(SEQUENTIAL_TAGS + 20):
            started = time.perf_counter()
            status, _ = await connection.request("GET", f"{PREFIX}/tags")
            if n >= 20:  # the first ones warm the connection pool and caches
                timings.append((time.perf_counter() - started) * 1000)
            assert status == 200
    finally:
        connection.close()
    return timings


async def measure(
    targets: dict[str, tuple[list[int], list[int]]], key: str, ids: list[str]
) -> dict[str, Any]:
    """Reads first, while the newest 5,000 contacts are the tagged seed; creates last."""
    ops = operations(ids)
    print("GET /tags one at a time", file=sys.stderr)
    service_ports, baseline_ports = targets["service"][0], targets["baseline"][0]
    results: dict[str, Any] = {
        "sequential_tags": {
            "service": await sequential_tags(service_ports[0], key),
            "baseline": await sequential_tags(baseline_ports[0], key),
        }
    }
    await rounds(targets, key, ops[:3], results)
    await rounds(targets, key, ops[3:], results)
    # The framework's floor: the service answering with no key check, no SQL, no limiter.
    results["healthz"], _ = await load(
        service_ports, key, lambda n: ("GET", "/healthz", b""), SECONDS, CONCURRENCY, (200,)
    )
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"Command: `python -m bench.contacts` (one sub-account with {CONTACTS} contacts, tags from "
        f"60 names, 0 to 5 each; {CONCURRENCY} keep-alive connections, {ROUNDS} alternating "
        f"rounds of {SECONDS:g} s per operation and target). {WORKERS} `switchboard serve` "
        f"processes against {WORKERS} processes of `bench/contacts/baseline.py`, each on its own "
        "port with the same number of connections (SO_REUSEPORT's hashing split 8 connections "
        "unevenly, differently in each run). The baseline is a "
        "bare ASGI app on the same server (hypercorn) running the same SQL on asyncpg: the API "
        "key resolved by the same query behind the same cache of resolved keys "
        f"(SWITCHBOARD_AUTH_CACHE_SECONDS={AUTH_CACHE} for both), then the same tenant statements "
        "in a tenant transaction; no framework, validation, rate limiter, metrics or access log. "
        "Both run in the same run against the same database, on a 2-core machine that also runs "
        "PostgreSQL, Redis and the load generator, so numbers move between runs; the ratios "
        "are what to read. CPU is the server processes' own time per request (user + system, "
        "from /proc).",
        "",
        "The third target, `unguarded`, is the same baseline with its tenant statements under "
        "the benchmark's superuser instead of the tenant role, which row-level security does not "
        "hold: `row security` = baseline / unguarded throughput is what the policies and the "
        "role switch cost (CONTRACT 18: at most 5 %, so at least 0.95).",
        "",
        "| operation | service req/s | baseline req/s | ratio | ratio per round, min to max "
        "| service p50 / p95 ms | baseline p50 / p95 ms | CPU ms per request service / baseline "
        "| unguarded req/s | row security |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    guarded = []
    verdicts = []
    for name, _, _ in operations(["x"]):
        entry = results[name]
        service = sum(entry["service"]) / len(entry["service"])
        base = sum(entry["baseline"]) / len(entry["baseline"])
        ratio = service / base
        verdicts.append(ratio >= 0.7)
        s_ms, b_ms = summary(entry["service_ms"]), summary(entry["baseline_ms"])
        s_cpu = sum(entry["service_cpu"]) / len(entry["service_cpu"])
        b_cpu = sum(entry["baseline_cpu"]) / len(entry["baseline_cpu"])
        per_round = [s / b for s, b in zip(entry["service"], entry["baseline"], strict=True)]
        unguarded = sum(entry["unguarded"]) / len(entry["unguarded"])
        guarded.append(base / unguarded >= 0.95)
        lines.append(
            f"| {name} | {service:.0f} | {base:.0f} | {ratio:.2f} | "
            f"{min(per_round):.2f} to {max(per_round):.2f} | "
            f"{s_ms['p50']:.1f} / {s_ms['p95']:.1f} | "
            f"{b_ms['p50']:.1f} / {b_ms['p95']:.1f} | {s_cpu:.2f} / {b_cpu:.2f} | "
            f"{unguarded:.0f} | {base / unguarded:.2f} |"
        )
    tags_service = summary(results["sequential_tags"]["service"])
    tags_base = summary(results["sequential_tags"]["baseline"])
    lines += [
        "",
        f"GET /tags over {CONTACTS} contacts, one request at a time ({SEQUENTIAL_TAGS} requests): "
        f"service p50 {tags_service['p50']:.1f} ms (p95 {tags_service['p95']:.1f}), baseline "
        f"p50 {tags_base['p50']:.1f} ms.",
        "",
        f"For scale: the service answers GET /healthz (no key, no SQL, no rate limiter) at "
        f"{results['healthz']:.0f} req/s under the same load.",
        "",
        f"Targets: every ratio >= 0.7 (issue 34): {'met' if all(verdicts) else 'NOT met'}; "
        f"row security costs at most 5 %: {'met' if all(guarded) else 'NOT met'}; GET /tags p50 "
        f"under 20 ms: {'met' if tags_service['p50'] < 20 else 'NOT met'}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    with bench_servers() as (url, redis_url, _):
        upgrade_control(url)
        key, ids = asyncio.run(prepare(url))
        smtp = Controller(Sink(), hostname="127.0.0.1", port=free_port())
        smtp.start()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(smtp.port),
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "100000000",
            "SWITCHBOARD_AUTH_CACHE_SECONDS": AUTH_CACHE,
        }
        logs = Path(tempfile.mkdtemp(prefix="switchboard-bench-contacts-"))
        try:
            with ExitStack() as stack:
                targets = {
                    "service": start(
                        stack,
                        env,
                        logs,
                        "service",
                        lambda port: ["cli", "serve", "--port", str(port)],
                    ),
                    "baseline": start(
                        stack,
                        env,
                        logs,
                        "baseline",
                        lambda port: ["bench.contacts.baseline", str(port)],
                    ),
                    # The same baseline with the tenant statements under the benchmark's
                    # superuser, which row-level security does not hold: what the policies
                    # and the role switch cost, in the same run.
                    "unguarded": start(
                        stack,
                        {**env, "BENCH_BASELINE_ROW_SECURITY": "off"},
                        logs,
                        "unguarded",
                        lambda port: ["bench.contacts.baseline", str(port)],
                    ),
                }
                results = asyncio.run(measure(targets, key, ids))
        finally:
            smtp.stop()
            shutil.rmtree(logs, ignore_errors=True)
    body = report(results)
    write_section("Contacts", body)
    print(body)


if __name__ == "__main__":
    main()
