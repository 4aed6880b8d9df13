"""The shared rate limit's view of its Redis: asked or not, what failed, a rate-limited log.

No Redis import here: the metrics read it whatever the backend.
"""

from __future__ import annotations

import logging
from typing import Literal

log = logging.getLogger("gateway.security.ratelimit")

OnError = Literal["local", "open", "closed"]

LOG_INTERVAL_S = 60.0
"""While Redis stays unavailable, one log line per this many seconds at most."""


class BackendHealth:
    """Whether Redis is being asked, what failed, and the rate-limited log of it."""

    def __init__(self, retry_after_s: float, on_error: OnError) -> None:
        self._retry_after_s = retry_after_s
        self._on_error = on_error
        self.down = False
        self.down_until = 0.0
        self.errors: dict[str, int] = {}
        self.decided_without: dict[str, int] = {}
        self._unlogged = 0
        self._logged_at = 0.0

    def asks(self, now: float, probe_s: float) -> bool:
        """True when this call should ask Redis (while down: one probe per retry_after)."""
        if not self.down:
            return True
        if now < self.down_until:
            return False
        self.down_until = now + probe_s  # the others decide locally until the probe ends
        return True

    def failed(self, kind: str, error: str, now: float) -> None:
        """Count a failure (`kind` labels the metric; `error` names its class in the log)."""
        self.errors[kind] = self.errors.get(kind, 0) + 1
        self.down_until = now + self._retry_after_s
        if not self.down or now - self._logged_at >= LOG_INTERVAL_S:
            also = f" ({self._unlogged} more failures since the last line)" if self.down else ""
            log.warning(
                "rate limit: Redis unavailable (%s: %s)%s; deciding calls with on_error=%s",
                kind,
                error,
                also,
                self._on_error,
            )
            self._logged_at = now
            self._unlogged = 0
        else:
            self._unlogged += 1
        self.down = True

    def answered(self) -> None:
        if self.down:
            log.info("rate limit: Redis answers again; buckets are shared again")
            self.down = False
            self._unlogged = 0

    def decided_locally(self) -> None:
        self.decided_without[self._on_error] = self.decided_without.get(self._on_error, 0) + 1
