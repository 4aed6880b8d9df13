"""Token buckets in this process: the bucket arithmetic every limiter here follows."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from gateway.config import RateLimitConfig


class RateLimiter:
    """Token buckets keyed by principal, each `burst` deep and refilled at `rate` per second.

    Memory is bounded: past `max_keys` buckets the least recently used one is
    dropped (its principal starts again with a full bucket). The event loop is
    single-threaded, so no lock is needed.
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @classmethod
    def from_config(cls, config: RateLimitConfig) -> RateLimiter:
        return cls(config.requests_per_second, config.burst, config.max_principals)

    def acquire(self, key: str) -> int | None:
        """Take one token for `key`: None when allowed, else milliseconds until one is free."""
        now = self._clock()
        tokens, last = self._buckets.pop(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)
        if allowed:
            return None
        return max(1, math.ceil((1.0 - tokens) / self._rate * 1000))


class LocalQuota:
    """A principal's call quota held in this process (``rate_limit.backend: memory``)."""

    health = None
    """No backend to watch: the buckets are this process's memory."""

    def __init__(self, limiter: RateLimiter) -> None:
        self._limiter = limiter

    async def acquire(self, key: str) -> int | None:
        """One token for `key`: None when allowed, else milliseconds until one is free."""
        return self._limiter.acquire(key)

    async def close(self) -> None:
        """Nothing to release: the buckets are this process's memory."""
