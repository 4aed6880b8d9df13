"""Load shedding: a bounded number of engine calls at once, and a short, bounded wait for a turn.

A call that finds every slot taken waits, first come first served, at most
``max_wait_s`` and never longer than its own deadline allows. It is refused at
once when it could not finish in time anyway: the expected wait for a slot
(the mean engine call time, times its place in the queue, over the slots) plus
one call of its own is longer than its remaining deadline, or the wait alone is
longer than ``max_wait_s``. At most ``limit`` calls wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque

from gateway.resilience.refusals import Overloaded

_ALPHA = 0.2
"""Weight of the newest sample in the mean engine call time."""


class InflightLimit:
    def __init__(self, limit: int, max_wait_s: float) -> None:
        self.limit = limit
        self._max_wait_s = max_wait_s
        self.inflight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._mean_s: float | None = None

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def expected_wait_s(self, place: int) -> float:
        """Seconds until the `place`-th caller in the queue (1 = next) gets a slot."""
        return (self._mean_s or 0.0) * place / self.limit

    def observe(self, seconds: float) -> None:
        """One engine call took `seconds`: it moves the mean the expected wait uses."""
        m = self._mean_s
        self._mean_s = seconds if m is None else m + _ALPHA * (seconds - m)

    async def acquire(self, budget_s: float) -> None:
        """Take a slot (give it back with release()), waiting at most what the budget allows.

        Raises:
            Overloaded: no slot, and waiting for one is not allowed or would not end in time.
        """
        if self.inflight < self.limit and not self._waiters:
            self.inflight += 1
            return
        place = len(self._waiters) + 1
        wait = self.expected_wait_s(place)
        if place > self.limit or wait > self._max_wait_s or wait + (self._mean_s or 0.0) > budget_s:
            raise Overloaded(self._retry_after_ms(place))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            async with asyncio.timeout(min(self._max_wait_s, budget_s)):
                await future
        except BaseException as exc:
            if future.done() and not future.cancelled():
                # The slot was handed over just as the wait ended.
                if isinstance(exc, TimeoutError):
                    return
                self.release()
                raise
            with contextlib.suppress(ValueError):
                self._waiters.remove(future)
            if isinstance(exc, TimeoutError):
                raise Overloaded(self._retry_after_ms(place)) from None
            raise

    def release(self) -> None:
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)  # the slot passes on: inflight stays
                return
        self.inflight -= 1

    def _retry_after_ms(self, place: int) -> int:
        return max(100, math.ceil(self.expected_wait_s(place) * 1000))
