"""The key cache: a busy key skips the lookup; a revoked key stops within the TTL, and at once
for a listening cache when a suspend or delete commits."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest
from sqlalchemy.engine import make_url

import tenancy.principals as principals
from tenancy.db import session_url
from tenancy.principals import PrincipalCache


async def _revoke(pool, key_hash_of) -> None:
    await pool.execute(
        "UPDATE control.api_keys SET revoked_at = now() WHERE key_hash = $1", key_hash_of
    )


async def test_a_cached_key_is_trusted_until_its_ttl_then_looked_up_again(pool, tenant) -> None:
    from tenancy.keys import hash_key

    cache = PrincipalCache(ttl=0.5)
    first = await cache.resolve(pool, tenant.key)
    assert first is not None and first.sub_account_id == tenant.id
    await _revoke(pool, hash_key(tenant.key))
    assert await cache.resolve(pool, tenant.key) == first  # within the TTL
    await asyncio.sleep(0.6)
    assert await cache.resolve(pool, tenant.key) is None  # looked up again: revoked


async def test_without_a_ttl_every_request_looks_the_key_up(pool, tenant) -> None:
    from tenancy.keys import hash_key

    cache = PrincipalCache(ttl=0)
    assert await cache.resolve(pool, tenant.key) is not None
    await _revoke(pool, hash_key(tenant.key))
    assert await cache.resolve(pool, tenant.key) is None


async def test_unknown_keys_are_never_cached(pool, tenant) -> None:
    cache = PrincipalCache(ttl=60)
    assert await cache.resolve(pool, tenant.key + "x") is None
    assert await cache.resolve(pool, "not-a-key") is None
    assert cache._entries == {}


async def test_each_key_resolves_to_its_own_sub_account(pool, tenant, tenant_second) -> None:
    cache = PrincipalCache(ttl=60)
    for _ in range(3):
        assert (await cache.resolve(pool, tenant.key)).sub_account_id == tenant.id
        assert (await cache.resolve(pool, tenant_second.key)).sub_account_id == tenant_second.id


# --- told of changes: LISTEN on tenancy.principals.CHANNEL ------------------------------------


async def _wait_for(condition, seconds: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + seconds
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def _listening(cache: PrincipalCache) -> bool:
    return cache.listening


@pytest.fixture
async def listening_cache(servers, pool) -> PrincipalCache:  # type: ignore[no-untyped-def]
    """A cache whose entries live 60 s while its listener runs (2 s without it)."""
    cache = PrincipalCache(ttl=2, notified_ttl=60)
    task = asyncio.create_task(cache.listen(session_url(servers.database_url), pool))
    await _wait_for(lambda: _listening(cache))
    yield cache
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_suspend_and_delete_reach_every_listening_cache_at_once(
    pool, tenant, tenant_second, listening_cache
) -> None:
    from tenancy import tenant_ops

    cache = listening_cache
    assert (await cache.resolve(pool, tenant.key)).sub_account_id == tenant.id
    assert (await cache.resolve(pool, tenant_second.key)).sub_account_id == tenant_second.id
    started = asyncio.get_running_loop().time()

    await tenant_ops.suspend(pool, tenant.id)
    # Gone long before the 60 s an entry lives while the cache listens: the notice reached it
    # (the bound is loose so that a loaded machine does not fail it; the listener stayed up, so
    # the 2 s of a cache without one never applied).
    await _wait_for(lambda: _gone(cache, pool, tenant.key), seconds=20)
    assert asyncio.get_running_loop().time() - started < 20
    assert cache.listening
    assert (await cache.resolve(pool, tenant_second.key)).sub_account_id == tenant_second.id

    await tenant_ops.resume(pool, tenant.id)
    assert (await cache.resolve(pool, tenant.key)).sub_account_id == tenant.id  # cached again
    await tenant_ops.delete(pool, tenant.id)
    await _wait_for(lambda: _gone(cache, pool, tenant.key), seconds=20)

    # A suspend of an already suspended sub-account changes nothing and tells no one.
    before = cache._generation
    await tenant_ops.suspend(pool, tenant_second.id)
    await _wait_for(lambda: _gone(cache, pool, tenant_second.key), seconds=20)
    after = cache._generation
    await tenant_ops.suspend(pool, tenant_second.id)
    await asyncio.sleep(0.3)
    assert cache._generation == after > before


async def _gone(cache: PrincipalCache, pool, key: str) -> bool:  # type: ignore[no-untyped-def]
    return await cache.resolve(pool, key) is None


async def test_without_its_listener_a_cache_trusts_keys_only_the_short_ttl(
    pool, tenant, listening_cache
) -> None:
    from tenancy.keys import hash_key

    cache = listening_cache
    cache.ttl, cache.reconnect_seconds = 0.5, 3.0
    assert await cache.resolve(pool, tenant.key) is not None  # cached for 60 s
    assert await pool.fetchval("SELECT pg_terminate_backend($1)", cache.listener_pid)
    await _wait_for(lambda: _not_listening(cache), seconds=10)
    assert cache._entries == {}  # what was trusted for 60 s is forgotten with the listener

    # A revocation in SQL, told to no one: while nobody listens it takes effect within the TTL.
    assert await cache.resolve(pool, tenant.key) is not None
    await _revoke(pool, hash_key(tenant.key))
    await asyncio.sleep(0.6)
    assert not cache.listening  # still in the 3 s pause before reconnecting
    assert await cache.resolve(pool, tenant.key) is None
    # And the listener comes back by itself.
    await _wait_for(lambda: _listening(cache), seconds=10)


async def test_a_listener_that_hears_nothing_never_earns_the_long_ttl(
    servers, pool, tenant
) -> None:
    """LISTEN somewhere the notifications do not reach (here another database; in production
    PgBouncer in transaction mode): the probes never arrive, so keys keep the short TTL."""
    from tenancy.keys import hash_key

    name = f"elsewhere_{uuid.uuid4().hex[:12]}"
    await pool.execute(f'CREATE DATABASE "{name}"')
    direct = make_url(session_url(servers.database_url))
    cache = PrincipalCache(ttl=0.5, notified_ttl=60)
    task = asyncio.create_task(
        cache.listen(direct.set(database=name).render_as_string(hide_password=False), pool)
    )
    try:
        await asyncio.sleep(principals.HEARTBEAT_SECONDS + 1)
        assert not cache.listening
        assert await cache.resolve(pool, tenant.key) is not None
        await _revoke(pool, hash_key(tenant.key))
        await asyncio.sleep(0.6)
        assert await cache.resolve(pool, tenant.key) is None  # the short TTL held
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await pool.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def _not_listening(cache: PrincipalCache) -> bool:
    return not cache.listening


async def test_a_lookup_overtaken_by_a_change_is_not_cached(
    pool, tenant, listening_cache, monkeypatch
) -> None:
    import tenancy.principals as principals

    cache = listening_cache
    real = principals.principal_for_key

    async def overtaken(conn, key):  # type: ignore[no-untyped-def]
        found = await real(conn, key)
        cache.clear()  # a suspend's notification arriving while the lookup was in flight
        return found

    monkeypatch.setattr(principals, "principal_for_key", overtaken)
    assert (await cache.resolve(pool, tenant.key)).sub_account_id == tenant.id
    assert cache._entries == {}
    monkeypatch.setattr(principals, "principal_for_key", real)
    assert await cache.resolve(pool, tenant.key) is not None
    assert len(cache._entries) == 1


async def test_the_api_answers_401_right_after_a_suspend_with_its_cache_on(
    migrated, tenant
) -> None:
    """The app as deployed (key cache on, listener started with it): a suspended sub-account's
    key is refused on the very next request, not when a cache entry expires."""
    from cli.wiring import build_app as create_app
    from tenancy import tenant_ops
    from tenancy.settings import get_settings

    settings = get_settings().model_copy(
        update={"auth_cache_seconds": 30.0, "auth_cache_notified_seconds": 300.0}
    )
    application = create_app(settings)
    async with application.test_app() as running:
        client = running.test_client()
        principals = application.config["PRINCIPALS"]
        await _wait_for(lambda: _listening(principals))
        url = "/webhooks/inbound/contacts"
        assert (await client.get(url, headers=tenant.headers)).status_code == 200
        assert (await client.get(url, headers=tenant.headers)).status_code == 200  # cached
        await tenant_ops.suspend(application.config["DB_POOL"], tenant.id)

        async def refused() -> bool:
            return (await client.get(url, headers=tenant.headers)).status_code == 401

        await _wait_for(refused, seconds=1.5)
