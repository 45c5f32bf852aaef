"""Where the servers are: the URLs from the environment, or embedded servers under the data dir."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tenancy.settings import Settings, get_settings


@dataclass
class Servers:
    """The PostgreSQL and Redis a command uses, and the embedded ones it started itself (and so
    stops when it ends: servers it found running, or named by URL, are left alone)."""

    database_url: str
    redis_url: str
    started: list[Any] = field(default_factory=list)

    def stop(self) -> None:
        while self.started:
            self.started.pop().stop()


def start_servers(settings: Settings) -> Servers:
    database_url, redis_url = settings.database_url, settings.redis_url
    started: list[Any] = []
    if database_url is None:
        from tenancy.embedded import start_postgres

        postgres = start_postgres(settings.data_dir)
        database_url = postgres.url
        if postgres.started_here:
            started.append(postgres)
    if redis_url is None:
        from tenancy.embedded import start_redis

        try:
            redis = start_redis(settings.data_dir)
        except BaseException:
            Servers(database_url, "", started).stop()
            raise
        redis_url = redis.url
        if redis.process is not None:
            started.append(redis)
    return Servers(database_url, redis_url, started)


def resolve_urls(settings: Settings) -> tuple[str, str]:
    servers = start_servers(settings)
    return servers.database_url, servers.redis_url


def pin(servers: Servers) -> Servers:
    """Pin the servers in the environment, so processes started from here use the same ones."""
    os.environ["DATABASE_URL"], os.environ["REDIS_URL"] = servers.database_url, servers.redis_url
    get_settings.cache_clear()
    return servers


def pin_urls() -> tuple[str, str]:
    """Resolve the servers (embedded ones when the URLs are unset) and pin them in the
    environment, so processes started from here use the same ones."""
    servers = pin(start_servers(get_settings()))
    return servers.database_url, servers.redis_url
