"""Several server processes on one port (`switchboard serve --workers N`).

Each child listens on a socket of its own with SO_REUSEPORT, so the kernel spreads new
connections over the children. (With one inherited socket, whichever child woke first accepted
every pending connection in one go: a burst of keep-alive connections all landed on one process
while the others idled.) The parent holds the port with a bound socket that does not listen,
so a port taken by another program fails at once and stays ours while a child restarts. A child
that dies is started again; SIGTERM or SIGINT is passed on to the children, which finish what
they are serving (graceful shutdown) before the parent exits. A parent killed outright (SIGKILL,
the OOM killer) cannot pass anything on: each child asks the kernel for SIGTERM when its parent
dies (Linux `PR_SET_PDEATHSIG`), so no child outlives the parent holding the port.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time

log = logging.getLogger("switchboard.prefork")

RESTART_PAUSE_SECONDS = 1.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent_pid: int) -> None:
    """In the child, before exec: SIGTERM when the parent dies; if it died already, now."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return  # not Linux: children outlive a killed parent, as before
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


def _socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def listen(host: str, port: int) -> socket.socket:
    """A child's listening socket, one of the SO_REUSEPORT group on (host, port)."""
    sock = _socket(host, port)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(2048)
    return sock


def run(child_command: list[str], host: str, port: int, workers: int, grace_seconds: float) -> int:
    """Serve with `workers` children, each started as `python *child_command` (which must
    listen with `listen(host, port)`), until a signal."""
    held = _socket(host, port)  # bound, never listening: receives no connections
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def start() -> subprocess.Popen[bytes]:
        parent = os.getpid()
        return subprocess.Popen(
            [sys.executable, *child_command],
            stdin=subprocess.DEVNULL,
            preexec_fn=lambda: _die_with_parent(parent),
        )

    children = [start() for _ in range(workers)]
    try:
        while not stopping:
            time.sleep(0.2)
            for index, child in enumerate(children):
                if child.poll() is not None and not stopping:
                    log.error(
                        "server process %s exited with %s; starting another",
                        child.pid,
                        child.returncode,
                    )
                    time.sleep(RESTART_PAUSE_SECONDS)
                    children[index] = start()
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds + 5
        for child in children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        held.close()
    return 0
