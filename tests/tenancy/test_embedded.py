"""The embedded servers start from the wheels alone (what `make run` uses with no URLs set)."""

from __future__ import annotations

import asyncpg
import redis

from tenancy.embedded import free_port, start_postgres, start_redis


async def test_embedded_postgres_and_redis_start_and_are_reused(tmp_path) -> None:
    pg = start_postgres(tmp_path, fast_unsafe=True)
    cache = start_redis(tmp_path, port=free_port())
    try:
        conn = await asyncpg.connect(pg.url)
        assert (await conn.fetchval("SHOW server_version")).startswith("18")
        await conn.close()
        assert start_postgres(tmp_path).port == pg.port  # a second start finds the running one
        assert redis.Redis.from_url(cache.url).ping()
        assert start_redis(tmp_path).port == cache.port
    finally:
        cache.stop()
        pg.stop()
