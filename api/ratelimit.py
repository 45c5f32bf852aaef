"""Per-key fixed-window rate limit, counted in Redis, which every API process shares.

Redis holds, per key and window, how many requests have been granted. A process takes grants
in small batches (a lease) and spends them locally, so a busy key costs one Redis round trip
per batch rather than per request. The lease is at most a tenth of what is left in the window
(and at most MAX_LEASE), so near the limit every request goes to Redis again: the total
admitted across all processes never exceeds the limit; a process may refuse a little early
when another holds unspent grants (at most a tenth of the remainder each). With one process
the counting, RateLimit-Remaining included, is exact.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass, field

import redis.asyncio as aioredis
import redis.exceptions

log = logging.getLogger("switchboard.ratelimit")

MAX_LEASE = 16

# Grant up to ARGV[1] more requests in this window, never past the limit ARGV[2]; the first
# grant sets the expiry (ARGV[3] ms) in the same step, so no counter is left without one.
# Returns {granted so far in total, granted now}.
LEASE = """
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - count)
if grant <= 0 then return {count, 0} end
count = redis.call('INCRBY', KEYS[1], grant)
if count == grant then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {count, grant}
"""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> dict[str, str]:
        headers = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_seconds),
        }
        if not self.allowed:
            headers["Retry-After"] = str(self.reset_seconds)
        return headers


@dataclass
class _Lease:
    window: int
    granted_total: int = 0  # the window's grants in Redis (all processes) at our last lease
    unspent: int = 0  # grants this process holds and has not used
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class RateLimiter:
    def __init__(
        self, client: aioredis.Redis, limit: int, window_seconds: int, fail_open: bool
    ) -> None:
        self.client = client
        self.limit = limit
        self.window_ms = window_seconds * 1000
        self.fail_open = fail_open
        self._sha = hashlib.sha1(LEASE.encode()).hexdigest()
        self._leases: dict[str, _Lease] = {}
        self._window = -1

    async def hit(self, key_id: str) -> Verdict | None:
        """Count one request for the key; None when Redis is down and the limiter fails open."""
        now_ms = int(time.time() * 1000)
        window = now_ms // self.window_ms
        # The window ends at a fixed instant; the counter expires then (plus a margin for clock
        # skew between this process and Redis), and Reset counts down to that instant.
        until_reset_ms = (window + 1) * self.window_ms - now_ms
        reset = max(1, -(-until_reset_ms // 1000))
        if window != self._window:
            self._window, self._leases = window, {}
        lease = self._leases.get(key_id)
        if lease is None:
            lease = self._leases[key_id] = _Lease(window)
        if lease.unspent == 0:
            async with lease.lock:  # one lease request at a time per key; the others wait
                if lease.unspent == 0:
                    try:
                        await self._take_lease(
                            lease, f"rl:{key_id}:{window}", until_reset_ms + 1000
                        )
                    except (
                        redis.exceptions.ConnectionError,
                        redis.exceptions.TimeoutError,
                        OSError,
                    ):
                        if self.fail_open:
                            log.warning("rate limiter unavailable; letting request through")
                            return None
                        raise
        if lease.unspent == 0:
            return Verdict(allowed=False, limit=self.limit, remaining=0, reset_seconds=reset)
        lease.unspent -= 1
        used = lease.granted_total - lease.unspent
        return Verdict(
            allowed=True, limit=self.limit, remaining=max(0, self.limit - used), reset_seconds=reset
        )

    async def _take_lease(self, lease: _Lease, key: str, expire_ms: int) -> None:
        size = max(1, min(MAX_LEASE, (self.limit - lease.granted_total) // 10))
        arguments = (1, key, size, self.limit, expire_ms)
        try:
            # redis-py's execute_command has no annotations (its stubs leave it untyped).
            total, granted = await self.client.execute_command(  # type: ignore[no-untyped-call]
                "EVALSHA", self._sha, *arguments
            )
        except redis.exceptions.NoScriptError:  # first use, or Redis restarted
            total, granted = await self.client.execute_command(  # type: ignore[no-untyped-call]
                "EVAL", LEASE, *arguments
            )
        lease.granted_total, lease.unspent = int(total), lease.unspent + int(granted)
