"""`switchboard serve --workers N`: N processes on one port, a dead one replaced, a clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tenancy.embedded import free_port


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry.name))
    return found


def wait_until(condition, seconds: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def established_on(pid: int, port: int) -> int:
    """How many accepted TCP connections on `port` the process `pid` holds (Linux /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01" and fields[9] in inodes:  # ESTABLISHED
                count += 1
    return count


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the server and every process it started, even when the test failed midway."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone: the server stopped with all its children
    process.wait()


def answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def serve_two_workers(servers) -> tuple[int, str, subprocess.Popen[bytes]]:  # type: ignore[no-untyped-def]
    """`switchboard serve --workers 2` on a free port, in its own process group (so cleanup can
    reach every child): its port, base URL and process."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--workers", "2", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return port, f"http://127.0.0.1:{port}", process


def test_workers_share_the_port_are_replaced_when_they_die_and_stop_on_sigterm(
    servers, migrated
) -> None:
    port, base, process = serve_two_workers(servers)
    try:
        wait_until(lambda: len(children_of(process.pid)) == 2 and answers(base))
        first = children_of(process.pid)
        # Many connections at once: all answered, by whichever process accepts each.
        with httpx.Client() as client:
            statuses = {client.get(f"{base}/healthz").status_code for _ in range(20)}
        assert statuses == {200}

        # A burst of keep-alive connections is spread over the processes (each listens on its
        # own SO_REUSEPORT socket), not all taken by whichever woke first.
        clients = [httpx.Client() for _ in range(32)]
        try:
            assert {c.get(f"{base}/healthz").status_code for c in clients} == {200}
            held = {pid: established_on(pid, port) for pid in first}
            # At least ours: a connection closed just before (the probes above) can still be
            # ESTABLISHED on the server's side until the loaded server reads its end.
            assert sum(held.values()) >= 32
            assert min(held.values()) > 0, held
        finally:
            for c in clients:
                c.close()

        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: len(children_of(process.pid) - {victim}) == 2)
        assert victim not in children_of(process.pid)
        wait_until(lambda: answers(base))

        survivors = children_of(process.pid)
        process.send_signal(signal.SIGTERM)
        assert process.wait(40) == 0
        assert not any(Path(f"/proc/{pid}").exists() for pid in survivors)  # stopped, reaped
        assert not answers(base)
    finally:
        kill_group(process)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_children_stop_when_the_parent_is_killed_outright(servers, migrated) -> None:
    _, base, process = serve_two_workers(servers)
    try:
        wait_until(lambda: len(children_of(process.pid)) == 2 and answers(base))
        children = children_of(process.pid)
        os.kill(process.pid, signal.SIGKILL)  # no handler runs: nothing is passed on
        process.wait()
        # Each child was told by the kernel (SIGTERM) and stopped: none holds the port.
        wait_until(lambda: not any(alive(pid) for pid in children), seconds=30)
        assert not answers(base)
    finally:
        kill_group(process)


def test_workers_must_be_at_least_one() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--workers", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "must be at least 1" in result.stderr
