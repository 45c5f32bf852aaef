"""The short-lived key cache: a busy key skips the lookup; a revoked key stops within the TTL."""

from __future__ import annotations

import asyncio

from tenancy.principals import PrincipalCache


async def _revoke(pool, key_hash_of) -> None:
    await pool.execute("UPDATE control.api_keys SET revoked_at = now() WHERE key_hash = $1",
                       key_hash_of)


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
