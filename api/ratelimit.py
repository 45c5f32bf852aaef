"""Per-key fixed-window rate limit on Redis, counted atomically by one Lua script."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
import redis.exceptions

log = logging.getLogger("switchboard.ratelimit")

# INCR and the first EXPIRE happen together, so concurrent requests can neither lose a count
# nor leave a counter without expiry.
HIT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
return {count, ttl}
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


class RateLimiter:
    def __init__(self, client: aioredis.Redis, limit: int, window_seconds: int,
                 fail_open: bool) -> None:
        self.client = client
        self.limit = limit
        self.window_ms = window_seconds * 1000
        self.fail_open = fail_open
        self._sha = hashlib.sha1(HIT.encode()).hexdigest()

    async def hit(self, key_id: str) -> Verdict | None:
        """Count one request for the key; None when Redis is down and the limiter fails open."""
        now_ms = int(time.time() * 1000)
        window = now_ms // self.window_ms
        # The window ends at a fixed instant; the counter expires then (plus a margin for clock
        # skew between this process and Redis), and Reset counts down to that instant.
        until_reset_ms = (window + 1) * self.window_ms - now_ms
        key, expire_ms = f"rl:{key_id}:{window}", until_reset_ms + 1000
        try:
            try:
                count, _ = await self.client.execute_command("EVALSHA", self._sha, 1, key,
                                                             expire_ms)
            except redis.exceptions.NoScriptError:  # first use, or Redis restarted
                count, _ = await self.client.execute_command("EVAL", HIT, 1, key, expire_ms)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            if self.fail_open:
                log.warning("rate limiter unavailable; letting request through")
                return None
            raise
        reset = max(1, -(-until_reset_ms // 1000))
        return Verdict(allowed=int(count) <= self.limit, limit=self.limit,
                       remaining=max(0, self.limit - int(count)), reset_seconds=reset)
