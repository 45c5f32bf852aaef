"""Several server processes on one listening socket (`switchboard serve --workers N`).

The parent binds the socket and starts N children that inherit it; the kernel hands each new
connection to whichever child accepts it first, so busy children take fewer. A child that dies
is started again. SIGTERM or SIGINT is passed on to the children, which finish what they are
serving (graceful shutdown) before the parent exits.
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

log = logging.getLogger("switchboard.prefork")

RESTART_PAUSE_SECONDS = 1.0


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=2048)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.set_inheritable(True)
    return sock


def run(child_command: Callable[[int], list[str]], host: str, port: int, workers: int,
        grace_seconds: float) -> int:
    """Serve with `workers` children, each started as `child_command(fd)`, until a signal."""
    sock = listen(host, port)
    fd = sock.fileno()
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, *child_command(fd)], pass_fds=(fd,),
                                stdin=subprocess.DEVNULL)

    children = [start() for _ in range(workers)]
    try:
        while not stopping:
            time.sleep(0.2)
            for index, child in enumerate(children):
                if child.poll() is not None and not stopping:
                    log.error("server process %s exited with %s; starting another", child.pid,
                              child.returncode)
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
        sock.close()
    return 0
