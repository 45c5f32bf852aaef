"""What a person sees: `switchboard dev` on a terminal writes readable lines and is quiet when idle;
through a pipe, and for the other commands, it writes JSON unless SWITCHBOARD_LOG_FORMAT says."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import asyncpg
import httpx
import pytest

from tenancy.embedded import free_port

SWITCHBOARD = [sys.executable, "-m", "cli"]
TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) +[\w.]+: "
)
IDLE_SECONDS = 11  # more than two of the sweeper's 5-second runs


class Terminal:
    """A process whose stdout and stderr are a pseudo-terminal, its output collected."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
        )
        os.close(slave)
        self.master, self.chunks = master, bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the process closed the terminal
                return
            if not chunk:
                return
            self.chunks.extend(chunk)

    def text(self) -> str:
        return bytes(self.chunks).decode(errors="replace").replace("\r\n", "\n")

    def stop(self, signalled: bool = True) -> int:
        """Send SIGTERM (unless `signalled` is False: wait for the process to end by itself)
        and return its exit code."""
        if signalled and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.reader.join(5)
            os.close(self.master)
        return code


@pytest.fixture
def dev_env(servers, tmp_path) -> Iterator[dict[str, str]]:
    """The environment of a `switchboard dev` on a database of its own (its demo data)."""
    name = f"sbdevlog_{uuid.uuid4().hex[:10]}"

    async def run(statement: str) -> None:
        conn = await asyncpg.connect(servers.admin_url)
        await conn.execute(statement)
        await conn.close()

    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    # Behind PgBouncer, the direct URL (migrations, LISTEN) must name the same database.
    env = {
        **os.environ,
        "REDIS_URL": servers.redis_url,
        "DATABASE_URL": servers.database_url.rsplit("/", 1)[0] + "/" + name,
        "SWITCHBOARD_DIRECT_DATABASE_URL": servers.direct_url.rsplit("/", 1)[0] + "/" + name,
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
        # dev runs a voice runtime of its own, beside any other this machine has.
        "SWITCHBOARD_VOICE_URL": f"ws://127.0.0.1:{free_port()}",
    }
    env.pop("SWITCHBOARD_LOG_FORMAT", None)
    yield env
    asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def wait_healthy(port: int, process: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "switchboard dev exited early"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("switchboard dev did not become healthy")


def demo_request(port: int, output: str) -> None:
    """One request with the printed demo sub-account key."""
    key = re.search(r"sub-account key:\s+(sb_\S+)", output)
    assert key, output
    answer = httpx.get(
        f"http://127.0.0.1:{port}/webhooks/inbound/team-users",
        headers={"x-api-key": key.group(1)},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text


def log_lines(output: str) -> list[str]:
    """The lines written by the logging set-up (the rest is the command's own text: the demo
    keys, hypercorn's own start line, warnings from imported packages)."""
    return [line for line in output.splitlines() if TEXT_LINE.match(line) or line.startswith("{")]


def test_dev_on_a_terminal_logs_readable_lines_and_is_quiet_when_idle(dev_env) -> None:
    port = free_port()
    terminal = Terminal([*SWITCHBOARD, "dev", "--port", str(port)], dev_env)
    try:
        wait_healthy(port, terminal.process)
        time.sleep(0.5)
        demo_request(port, terminal.text())
        time.sleep(1)  # the log writer flushes every 50 ms
        before_idle = len(terminal.text())
        time.sleep(IDLE_SECONDS)
        idle = terminal.text()[before_idle:]
    finally:
        assert terminal.stop() == 0
    output = terminal.text()
    lines = log_lines(output)
    # Given dev on a terminal, then every log line is "time LEVEL logger: message".
    assert lines and not [line for line in lines if line.startswith("{")], output
    access = [
        line for line in lines if "switchboard.access: GET /webhooks/inbound/team-users" in line
    ]
    assert len(access) == 1, output
    assert re.search(
        r" INFO +switchboard\.access: GET /webhooks/inbound/team-users 200 "
        r"\[request_id=[0-9a-f]{32} sub_account_id=[0-9a-f-]{36}\]$",
        access[0],
    )
    # Lines written outside a request carry no ids.
    assert any(
        " arq.worker: Starting worker" in line and "request_id" not in line for line in lines
    ), output
    # While idle (the sweeper runs every 5 seconds), nothing is written at INFO.
    assert not [line for line in idle.splitlines() if line.strip()], idle
    assert not re.search(r"[→←] sweep_due", output), output
    assert "setup plugin" not in output and "Context impl" not in output


@contextlib.contextmanager
def piped_dev(env: dict[str, str]) -> Iterator[tuple[int, subprocess.Popen[str], str]]:
    """`switchboard dev` with its output through a pipe: its port, its process and what it
    printed up to the demo keys; killed on the way out if it is still running."""
    port = free_port()
    process = subprocess.Popen(
        [*SWITCHBOARD, "dev", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(port, process)  # type: ignore[arg-type]
        assert process.stderr is not None
        printed = ""
        while "sub-account key:" not in printed:
            line = process.stderr.readline()
            assert line, printed
            printed += line
        yield port, process, printed
    finally:
        if process.poll() is None:
            process.kill()


def test_dev_through_a_pipe_logs_json(dev_env) -> None:
    with piped_dev(dev_env) as (port, process, printed):
        demo_request(port, printed)
        time.sleep(1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert process.stderr is not None
        output = printed + process.stderr.read()
    lines = log_lines(output)
    assert lines and all(line.startswith("{") for line in lines), output
    records = [json.loads(line) for line in lines]
    assert all(
        {"time", "level", "logger", "message", "request_id", "sub_account_id"} <= set(record)
        for record in records
    )
    [access] = [
        r
        for r in records
        if r["logger"] == "switchboard.access"
        and r["message"] == "GET /webhooks/inbound/team-users 200"
    ]
    assert access["level"] == "INFO" and access["request_id"] and access["sub_account_id"]


FORMAT_OF = [
    sys.executable,
    "-c",
    "import sys; from cli.main import log_format; print(log_format(sys.argv[1]))",
]


def chosen_format(command: str, terminal: bool, setting: str | None = None) -> str:
    """The format `switchboard <command>` logs in, with stderr a terminal or a pipe."""
    env = {k: v for k, v in os.environ.items() if k != "SWITCHBOARD_LOG_FORMAT"}
    if setting is not None:
        env["SWITCHBOARD_LOG_FORMAT"] = setting
    if not terminal:
        done = subprocess.run(
            [*FORMAT_OF, command], env=env, capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout.strip()
    session = Terminal([*FORMAT_OF, command], env)
    assert session.stop(signalled=False) == 0
    return session.text().strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("command", "terminal", "setting", "expected"),
    [
        ("dev", True, None, "text"),
        ("dev", False, None, "json"),
        ("dev", True, "json", "json"),
        ("dev", False, "text", "text"),
        ("serve", True, None, "json"),
        ("worker", True, None, "json"),
        ("worker", False, "text", "text"),
    ],
)
def test_log_format_dev_on_a_terminal_is_text_else_json_unless_set(
    command: str, terminal: bool, setting: str | None, expected: str
) -> None:
    assert chosen_format(command, terminal, setting) == expected


ROUTINE = """
import logging, sys
from tenancy.logs import configure_logging, _stop_writer
configure_logging("text", getattr(logging, sys.argv[1]))
arq = logging.getLogger("arq.worker")
arq.info("%6.2fs → %s(%s)%s", 0.5, "sweep_due", "", "")
arq.info("%6.2fs ← %s ● %s", 0.0, "sweep_due", 0)
arq.info("%6.2fs → %s(%s)%s", 1.0, "cron:purge_idempotency_keys", "", "")
arq.info("%6.2fs ← %s ● %s", 0.0, "cron:purge_idempotency_keys", 0)
arq.error("%6.2fs ! %s failed, %s: %s", 0.2, "cron:purge_old_events", "OSError", "gone")
arq.info("%6.2fs → %s(%s)%s", 0.1, "1a2b:run_due", "'x', 1", "")
logging.getLogger("alembic.runtime.plugins").info("setup plugin %s", "alembic.autogenerate")
logging.getLogger("alembic.runtime.migration").info("Context impl %s.", "PostgresqlImpl")
logging.getLogger("alembic.runtime.migration").info("Running upgrade %s -> %s", "a", "b")
_stop_writer()
"""


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_cron_runs_and_alembic_setup_are_debug(level: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ROUTINE, level],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = log_lines(done.stderr)
    assert any(" INFO    arq.worker:   0.10s → 1a2b:run_due('x', 1)" in line for line in lines)
    # A failed cron run is never demoted.
    assert any(
        " ERROR   arq.worker:   0.20s ! cron:purge_old_events failed, OSError: gone" in line
        for line in lines
    ), done.stderr
    assert any(
        " INFO    alembic.runtime.migration: Running upgrade a -> b" in line for line in lines
    )
    routine = [
        line
        for line in lines
        if "sweep_due" in line
        or "setup plugin" in line
        or "Context impl" in line
        or "purge_idempotency_keys" in line
    ]
    if level == "INFO":
        assert routine == [], done.stderr
    else:
        assert len(routine) == 6 and all(" DEBUG   " in line for line in routine), done.stderr


def test_dev_without_smtp_host_keeps_sent_mail_in_the_data_dir(dev_env, tmp_path) -> None:
    env = {name: value for name, value in dev_env.items() if name not in ("SMTP_HOST", "SMTP_PORT")}
    with piped_dev(env) as (port, process, printed):
        key = re.search(r"sub-account key:\s+(sb_\S+)", printed)
        assert key and f"every email sent is kept in {tmp_path / 'mail'}" in printed, printed
        api = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/webhooks/inbound",
            timeout=30,
            headers={"x-api-key": key.group(1)},
        )
        contact = api.post("/contacts", json={"name": "Ada", "email": "ada@example.com"})
        assert contact.status_code == 201, contact.text
        sent = api.post(
            f"/contacts/{contact.json()['contact_id']}/messages",
            json={"message_type": "email", "subject": "Hello from dev", "content": "It works."},
        )
        assert sent.status_code in (200, 201), sent.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    # The demo owner's invitation, then the message.
    kept = sorted(
        (path.read_text() for path in (tmp_path / "mail" / "new").iterdir()),
        key=lambda mail: "ada@" in mail,
    )
    assert len(kept) == 2
    assert "To: owner@demo.example.com" in kept[0]
    assert "To: ada@example.com" in kept[1] and "Subject: Hello from dev" in kept[1]
    assert "It works." in kept[1]
