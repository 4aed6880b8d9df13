"""One token bucket per principal in Redis, shared by every replica (``backend: redis``).

The bucket is a hash ``{tokens, at}`` updated by one Lua script, so a read, the
refill and the take are one atomic step on the server, whichever replica sends
it. The arithmetic is ``memory.RateLimiter``'s, line for line, on Redis's own
clock (``TIME``), so replicas with skewed clocks still share one bucket. A key
expires a minute after its bucket would be full again: an absent key is a full
bucket, so memory in Redis follows the principals seen lately.

Every call is awaited under a deadline (``timeout_ms``, connect included); when
Redis fails or is late, ``on_error`` decides the call (this replica's own
bucket, allow, or refuse) and Redis is left alone for ``retry_after_ms`` before
one call probes it again. Failures are counted (``a2m_ratelimit_backend_*``)
and logged at most once a minute, never with the URL or the password.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import AuthenticationError, NoScriptError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeout

from gateway.config import RateLimitConfig, SharedQuotaConfig
from gateway.security.ratelimit.connections import RedisConnections, pack
from gateway.security.ratelimit.health import BackendHealth, OnError
from gateway.security.ratelimit.memory import RateLimiter

# KEYS[1] the bucket; ARGV rate (tokens/s), burst, and optionally now (seconds; tests).
# Numbers are stored with 17 significant digits, so a double survives the round trip.
BUCKET_SCRIPT = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1])
local last = tonumber(held[2])
if tokens == nil or last == nil then
  tokens = burst
  last = now
end
tokens = math.min(burst, tokens + math.max(0, now - last) * rate)
local wait = 0
if tokens >= 1.0 then
  tokens = tokens - 1.0
else
  wait = math.max(1, math.ceil((1.0 - tokens) / rate * 1000))
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
  'at', string.format('%.17g', now))
local ttl = math.min(math.ceil((burst - tokens) / rate * 1000) + 60000, 2592000000)
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
return wait
"""
# SHA-1 is how Redis names a script (EVALSHA), not a security measure.
BUCKET_SHA = hashlib.sha1(BUCKET_SCRIPT.encode(), usedforsecurity=False).hexdigest()
_SHA = BUCKET_SHA.encode()
_LOAD = pack(b"SCRIPT", b"LOAD", BUCKET_SCRIPT.encode())


def error_kind(exc: BaseException) -> str:
    """The label a failure is counted under: timeout, connection, auth, or error."""
    if isinstance(exc, TimeoutError | RedisTimeout):
        return "timeout"
    if isinstance(exc, AuthenticationError):
        return "auth"
    if isinstance(exc, RedisConnectionError | OSError):
        return "connection"
    return "error"


class SharedQuota:
    """A principal's call quota in Redis, held to across every replica."""

    def __init__(
        self,
        redis: RedisConnections,
        rate: float,
        burst: int,
        *,
        key_prefix: str,
        timeout_ms: int,
        on_error: OnError,
        retry_after_ms: int,
        fallback: RateLimiter,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._redis = redis
        self._args: tuple[bytes, ...] = (repr(float(rate)).encode(), str(burst).encode())
        self._prefix = key_prefix
        self._timeout_s = timeout_ms / 1000
        self._on_error = on_error
        self._retry_after_ms = retry_after_ms
        self._fallback = fallback
        # None: Redis's clock decides (production); a clock: the tests' own time.
        self._clock = clock
        self.health = BackendHealth(retry_after_ms / 1000, on_error)

    @classmethod
    def from_config(cls, config: RateLimitConfig) -> SharedQuota:
        """Built from ``server.rate_limit`` with ``backend: redis``.

        Raises:
            ValueError: ``rate_limit.redis`` is not set.
        """
        if config.redis is None:
            raise ValueError("rate_limit.backend redis needs rate_limit.redis")
        return cls(
            connect(config.redis),
            config.requests_per_second,
            config.burst,
            key_prefix=config.redis.key_prefix,
            timeout_ms=config.redis.timeout_ms,
            on_error=config.redis.on_error,
            retry_after_ms=config.redis.retry_after_ms,
            fallback=RateLimiter.from_config(config),
        )

    def bucket_key(self, key: str) -> str:
        """The Redis key of a principal's bucket: a digest, so subjects are not stored."""
        return self._prefix + hashlib.sha256(key.encode()).hexdigest()[:32]

    async def acquire(self, key: str) -> int | None:
        """Take one token for `key`: None when allowed, else milliseconds until one is free."""
        now = time.monotonic()
        if self.health.asks(now, self._timeout_s):
            try:
                async with asyncio.timeout(self._timeout_s):
                    wait = await self._update(self.bucket_key(key))
            except (RedisError, OSError, TimeoutError) as exc:
                kind = error_kind(exc)
                self.health.failed(kind, type(exc).__name__, time.monotonic())
                if kind == "connection":
                    # Its idle connections led to the server that just failed: a restarted
                    # Redis would otherwise fail once per stale connection.
                    await self._redis.drop_idle()
            else:
                self.health.answered()
                return None if wait == 0 else wait
        self.health.decided_locally()
        if self._on_error == "open":
            return None
        if self._on_error == "closed":
            return self._retry_after_ms
        return self._fallback.acquire(key)

    async def _update(self, bucket: str) -> int:
        args = self._args
        if self._clock is not None:
            args = (*args, repr(self._clock()).encode())
        command = pack(b"EVALSHA", _SHA, b"1", bucket.encode(), *args)
        try:
            reply: Any = await self._redis.call(command)
        except NoScriptError:  # a restarted or flushed Redis: load it once, then as before
            await self._redis.call(_LOAD)
            reply = await self._redis.call(command)
        return int(reply)

    async def close(self) -> None:
        await self._redis.close()


def connect(config: SharedQuotaConfig) -> RedisConnections:
    """Connections for ``rate_limit.redis`` (none open until the first call)."""
    return RedisConnections.from_config(config)
