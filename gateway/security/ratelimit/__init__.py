"""Per-principal rate limits: a token bucket per caller, answered with -32006 QUOTA_EXCEEDED.

``memory`` holds the buckets in this process (also the failed-authentication
limiter's); ``shared`` holds them in one Redis (or Valkey) that every replica
updates with the same arithmetic, in one server-side script. ``CallQuota`` is
what the HTTP admission and the dispatcher charge; ``make_quota`` builds it from
``server.rate_limit`` and imports the Redis client only for ``backend: redis``.
"""

from __future__ import annotations

from typing import Protocol

from gateway.config import RateLimitConfig
from gateway.security.ratelimit.health import BackendHealth
from gateway.security.ratelimit.memory import LocalQuota, RateLimiter


class CallQuota(Protocol):
    """A principal's call rate: one token per call."""

    @property
    def health(self) -> BackendHealth | None:
        """The shared backend's state (metrics read it); None for buckets in this process."""
        ...

    async def acquire(self, key: str) -> int | None:
        """Take one token for `key`: None when allowed, else milliseconds until one is free."""
        ...

    async def close(self) -> None: ...


def make_quota(config: RateLimitConfig) -> CallQuota:
    """The quota `config.backend` names (the Redis client is imported only for redis)."""
    if config.backend == "redis":
        from gateway.security.ratelimit.shared import SharedQuota

        return SharedQuota.from_config(config)
    return LocalQuota(RateLimiter.from_config(config))


__all__ = ["CallQuota", "LocalQuota", "RateLimiter", "make_quota"]
