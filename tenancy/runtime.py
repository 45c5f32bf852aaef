"""Where the servers are: the URLs from the environment, or embedded servers under the data dir."""

from __future__ import annotations

import os

from tenancy.settings import Settings, get_settings


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


def pin_urls() -> tuple[str, str]:
    """Resolve the servers (embedded ones when the URLs are unset) and pin them in the
    environment, so processes started from here use the same ones."""
    database_url, redis_url = resolve_urls(get_settings())
    os.environ["DATABASE_URL"], os.environ["REDIS_URL"] = database_url, redis_url
    get_settings.cache_clear()
    return database_url, redis_url
