"""Where the servers are: the URLs from the environment, or embedded servers under the data dir."""

from __future__ import annotations

from tenancy.settings import Settings


def resolve_urls(settings: Settings) -> tuple[str, str]:
    database_url = settings.database_url
    redis_url = settings.redis_url
    if database_url is None:
        from tenancy.embedded import start_postgres

        database_url = start_postgres(settings.data_dir).url
    if redis_url is None:
        from tenancy.embedded import start_redis

        redis_url = start_redis(settings.data_dir).url
    return database_url, redis_url
