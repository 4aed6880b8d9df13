"""Hold a call that meets an open breaker for the breaker's next decision, briefly.

Refusing at once turns the moment an engine comes back into errors: the watcher's
good ping, or the end of the timed wait, lets one probe through, and every call
arriving meanwhile is refused although the probe is about to close the breaker. A
held call waits, at most ``hold_ms`` and at most half of what its deadline leaves,
for the breaker to move: closed, it goes on; half-open with no probe, it is the probe;
still open or probing when its hold ends, it is refused as before. A call is not held
when nothing can move the breaker before its hold ends (the timed wait ends later and
no health check may end it early), so an engine that stays down costs no added latency
beyond the first decision.

A federation's fan-out does not hold its members (``unheld``): a member that is down is
left out of the answer, and holding it would delay every federated answer by the hold
while the other members have answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from gateway.resilience.breaker import BreakerState, CircuitBreaker, Ticket
from gateway.resilience.refusals import CircuitOpen

_PROBE_POLL_S = 0.05
"""While a probe is under way, look again this often: a probe whose caller went away frees
its slot without a transition, and a waiter may then be the next probe."""

_held: ContextVar[bool] = ContextVar("a2m_breaker_hold", default=True)


@contextmanager
def unheld() -> Iterator[None]:
    """Calls made in this block (and tasks it starts) are refused at once by an open breaker."""
    token = _held.set(False)
    try:
        yield
    finally:
        _held.reset(token)


class BreakerHold:
    def __init__(self, breaker: CircuitBreaker, hold_s: float) -> None:
        self._breaker = breaker
        self._hold_s = hold_s
        self._moved = asyncio.Event()
        self.checked = False
        """A watcher may end an opening early (set by the guard when it watches)."""
        breaker.on_transition(self._on_transition)

    def _on_transition(self, before: BreakerState, after: BreakerState) -> None:
        # Wake every waiter, then arm a fresh event for the next transition.
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def admit_refused(self, budget_s: float) -> Ticket:
        """The call the breaker has just refused: its ticket, if the breaker admits it
        within the hold (at most half of `budget_s`, what the call's deadline leaves).

        Raises:
            CircuitOpen: still open (or probing) when the hold ends, or nothing could
                move it before then; Retry-After as of the refusal.
        """
        breaker = self._breaker
        hold_s = min(self._hold_s, budget_s / 2)
        if hold_s <= 0 or not _held.get():
            raise CircuitOpen(breaker.retry_after_ms())
        loop = asyncio.get_running_loop()
        end = loop.time() + hold_s
        while True:
            left = end - loop.time()
            if breaker.waiting:
                # Open: the timed wait's end is the next decision, unless a check may come first.
                if breaker.wait_left_s > left and not (self.checked and breaker.heeds_checks):
                    left = 0.0
                else:
                    left = min(left, breaker.wait_left_s)
            else:
                left = min(left, _PROBE_POLL_S)
            if left <= 0:
                raise CircuitOpen(breaker.retry_after_ms())
            moved = self._moved
            try:
                async with asyncio.timeout(left):
                    await moved.wait()
            except TimeoutError:
                pass
            try:
                return breaker.admit()
            except CircuitOpen:
                if loop.time() >= end:
                    raise
