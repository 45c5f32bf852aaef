"""`switchboard worker` started before Redis waits for it (CONTRACT 11): it keeps running, says
so once (then once a minute), and runs jobs as soon as Redis answers; Redis going away later is
waited out the same way."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

from arq import create_pool as create_arq_pool
from arq.connections import RedisSettings

from tenancy.embedded import free_port, start_redis

SWITCHBOARD = [sys.executable, "-m", "cli"]


async def ping(redis_url: str, value: str) -> str:
    """The result of a `ping` job queued now (what the worker answers)."""
    arq = await create_arq_pool(RedisSettings.from_dsn(redis_url))
    try:
        job = await arq.enqueue_job("ping", value)
        return await job.result(timeout=30)  # type: ignore[no-any-return]
    finally:
        await arq.aclose()


async def test_worker_started_before_redis_waits_for_it_then_runs_jobs(
    servers, migrated, tmp_path
) -> None:
    port = free_port()  # nothing listens here yet
    redis_url = f"redis://127.0.0.1:{port}/0"
    stderr = tmp_path / "worker.stderr"
    with stderr.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            *SWITCHBOARD,
            "worker",
            env={**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": redis_url},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=output,
        )
    redis = None
    try:
        # Longer than arq's own connection retries (5, a second apart), after which it gave up.
        await asyncio.sleep(7)
        assert process.returncode is None, stderr.read_text()
        log = stderr.read_text()
        # Said once, not at every retry (about one a second).
        assert log.count("cannot be reached") == 1, log

        redis = start_redis(tmp_path, port=port)
        assert await ping(redis_url, "after the wait") == "pong:after the wait"
        assert process.returncode is None

        redis.stop()
        await asyncio.sleep(3)
        assert process.returncode is None, stderr.read_text()
        redis = start_redis(tmp_path, port=port)
        assert await ping(redis_url, "after an outage") == "pong:after an outage"

        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0, stderr.read_text()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        if redis is not None:
            redis.stop()
