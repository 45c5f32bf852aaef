"""`switchboard dev` leaves nothing behind and fails clearly (CONTRACT 1, issue 24): on Ctrl-C it
stops the embedded PostgreSQL and Redis it started; a port in use is one line naming it and how
to choose another, before anything starts; the demo keys are printed once the API answers."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tenancy.embedded import _redis_answers, _running_port, free_port

SWITCHBOARD = [sys.executable, "-m", "cli"]


def embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """dev with no DATABASE_URL or REDIS_URL: it starts its own servers under data_dir."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in (
            "DATABASE_URL",
            "REDIS_URL",
            "SWITCHBOARD_DIRECT_DATABASE_URL",
            "SWITCHBOARD_DB_STATEMENT_CACHE_SIZE",
            "SWITCHBOARD_LOG_FORMAT",
        )
    }
    return {
        **env,
        "SWITCHBOARD_DATA_DIR": str(data_dir),
        "SWITCHBOARD_VOICE_URL": f"ws://127.0.0.1:{free_port()}",
        **extra,
    }


def redis_port(data_dir: Path) -> int:
    return int((data_dir / "redis" / "port").read_text())


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data dir outside pytest's own temporary folder: pytest makes that folder private to
    root again when another worker starts, and the embedded PostgreSQL runs as its own user."""
    folder = Path(tempfile.mkdtemp(prefix="switchboard-dev-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_ctrl_c_stops_the_embedded_servers_dev_started(data_dir: Path) -> None:
    tmp_path = data_dir
    # given dev on embedded PostgreSQL and Redis, serving
    port = free_port()
    log = tmp_path / "dev.stderr"
    process = subprocess.Popen(
        [*SWITCHBOARD, "dev", "--port", str(port)],
        env=embedded_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    try:
        deadline = time.monotonic() + 180
        while "sub-account key:" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        # the keys came once the API answered
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        assert _running_port(tmp_path / "postgres") is not None
        assert _redis_answers(redis_port(tmp_path))
        # when Ctrl-C reaches it
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    # then neither server is left running
    assert _running_port(tmp_path / "postgres") is None, log.read_text()[-3000:]
    assert not _redis_answers(redis_port(tmp_path))
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def test_a_port_in_use_is_one_line_naming_it_and_nothing_is_started(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        done = subprocess.run(
            [*SWITCHBOARD, "dev", "--port", str(taken)],
            env=embedded_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert f"port {taken}" in done.stderr and f"make run PORT={taken + 1}" in done.stderr
    assert not (tmp_path / "postgres").exists() and not (tmp_path / "redis").exists()


def test_a_voice_port_in_use_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        env = embedded_env(tmp_path, SWITCHBOARD_VOICE_URL=f"ws://127.0.0.1:{taken}")
        done = subprocess.run(
            [*SWITCHBOARD, "dev", "--port", str(free_port())],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 1
    assert re.fullmatch(
        rf"switchboard dev: the voice runtime's port {taken} "
        r".*SWITCHBOARD_VOICE_URL=\S+\n",
        done.stderr,
    ), done.stderr
