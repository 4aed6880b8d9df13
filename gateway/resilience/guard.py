"""One store's guard: its circuit breaker, then its in-flight limit, around every engine call.

What counts against the engine (docs/operations.md): it was unreachable, it
answered 429/5xx after the connector's retries, or it gave no answer before the
deadline (the connector's EngineTimeout, or the store's deadline cancelling the
call). A refusal of the caller's query (4xx, too many clauses), a missing index
and refused credentials mean the engine answered: they count as successes.
Calls the gateway itself refused (scope, params) never reach the guard; a call
its client abandoned teaches nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from connectors.errors import EngineConfigError, EngineRejected, EngineTimeout, EngineUnavailable
from connectors.retry import remaining
from gateway.resilience.breaker import (
    BreakerPolicy,
    BreakerState,
    CircuitBreaker,
    Clock,
    Outcome,
    Ticket,
)
from gateway.resilience.config import ResilienceConfig
from gateway.resilience.hold import BreakerHold
from gateway.resilience.reachability import ReachabilityLog
from gateway.resilience.refusals import CircuitOpen, Overloaded
from gateway.resilience.shedding import InflightLimit

T = TypeVar("T")

_NO_DEADLINE_S = 30.0
"""The budget of a call made outside any deadline (start-up, `check`)."""
_AT_DEADLINE_S = 0.05
"""A cancellation this close to the deadline is the deadline's (loop clocks may be coarse)."""


class GuardObserver(Protocol):
    """What the metrics module is told; gauges are read from the guard when scraped."""

    def breaker_transition(self, store: str, before: BreakerState, after: BreakerState) -> None: ...

    def shed(self, store: str, reason: str) -> None: ...


def outcome_of(exc: BaseException) -> Outcome:
    """What a failed engine call says about the engine (see the module docstring)."""
    if isinstance(exc, asyncio.CancelledError):
        # The store's deadline cancels the call when it passes; anything else
        # cancelling it (a client gone) says nothing of the engine.
        return Outcome.FAILURE if remaining(_NO_DEADLINE_S) <= _AT_DEADLINE_S else Outcome.NEUTRAL
    if isinstance(exc, EngineTimeout | EngineUnavailable):
        return Outcome.FAILURE
    if isinstance(exc, EngineRejected | EngineConfigError):
        return Outcome.SUCCESS
    return Outcome.NEUTRAL


class EngineGuard:
    """Shared by every call of one store, credential-forwarding views included."""

    def __init__(
        self,
        store: str,
        config: ResilienceConfig,
        pool_size: int,
        *,
        clock: Clock = time.monotonic,
    ) -> None:
        self.store = store
        b, s = config.breaker, config.shedding
        self.breaker = (
            CircuitBreaker(
                BreakerPolicy(
                    failure_threshold=b.failure_threshold,
                    window_s=b.window_ms / 1000,
                    open_s=b.open_ms / 1000,
                    max_open_s=b.max_open_ms / 1000,
                ),
                clock,
            )
            if b.enabled
            else None
        )
        self._hold = (
            BreakerHold(self.breaker, b.hold_ms / 1000)
            if self.breaker is not None and b.hold_ms > 0
            else None
        )
        self.limit = (
            InflightLimit(s.max_inflight or pool_size, s.max_wait_ms / 1000) if s.enabled else None
        )
        self._observers: list[GuardObserver] = []
        self.reachability = ReachabilityLog(store)
        self._watch_s = b.watch_ms / 1000
        self._watched: Callable[[], Awaitable[bool]] | None = None
        self._watcher: asyncio.Task[None] | None = None

    def observe(self, observer: GuardObserver) -> None:
        self._observers.append(observer)
        if self.breaker is not None:
            self.breaker.on_transition(
                lambda before, after: observer.breaker_transition(self.store, before, after)
            )

    def watch(self, ping: Callable[[], Awaitable[bool]]) -> None:
        """While the breaker is open, call `ping` every ``watch_ms`` (never more often, and
        only then); its first good answer ends the wait (``CircuitBreaker.probe_now``)."""
        if self.breaker is None or self._watch_s <= 0 or self._watched is not None:
            return
        self._watched = ping
        self.breaker.on_transition(self._opened)
        if self._hold is not None:
            self._hold.checked = True

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None

    def _opened(self, before: BreakerState, after: BreakerState) -> None:
        if after is not BreakerState.OPEN or (self._watcher and not self._watcher.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # opened outside a loop (a test's synchronous step): nothing to watch from
        self._watcher = loop.create_task(self._watch(), name=f"a2m-breaker-watch-{self.store}")

    async def _watch(self) -> None:
        breaker, ping = self.breaker, self._watched
        assert breaker is not None
        assert ping is not None
        # Not after a check-triggered probe failed: this opening no longer heeds checks.
        while breaker.heeds_checks:
            await asyncio.sleep(self._watch_s)
            if not breaker.heeds_checks:
                return  # the timed wait ended first: a call probes as before
            try:
                # A ping never raises; a hung one is cut off so the watch keeps its pace.
                async with asyncio.timeout(max(1.0, 4 * self._watch_s)):
                    answered = await ping()
            except TimeoutError:
                answered = False
            if answered and breaker.probe_now():
                return

    @property
    def state(self) -> BreakerState:
        return self.breaker.state if self.breaker is not None else BreakerState.CLOSED

    @property
    def inflight(self) -> int:
        return self.limit.inflight if self.limit is not None else 0

    async def call(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run one engine call, unless the breaker is open or no slot comes in time.

        A call meeting an open breaker is held for its next decision (``hold_ms``).

        Raises:
            CircuitOpen: the breaker is still open after the hold (the engine is not called).
            Overloaded: every slot is taken and none comes in time (not called).
            connectors.errors.ConnectorError: whatever the call raises.
        """
        try:  # the closed breaker's answer, without a coroutine on the hot path
            ticket = self.breaker.admit() if self.breaker is not None else None
        except CircuitOpen as refused:
            ticket = await self._held(refused)
        if self.limit is not None:
            try:
                await self.limit.acquire(remaining(_NO_DEADLINE_S))
            except BaseException as exc:
                self._record(ticket, Outcome.NEUTRAL)
                if isinstance(exc, Overloaded):
                    self._shed("overloaded")
                raise
        try:
            return await self._timed(ticket, call)
        finally:
            if self.limit is not None:
                self.limit.release()

    async def ping(self, ping: Callable[[], Awaitable[bool]]) -> bool:
        """The engine's ping, unless the breaker is open; in half-open, the ping is the probe."""
        if self.breaker is None:
            return await ping()
        try:
            ticket = self.breaker.admit()
        except CircuitOpen:
            return False
        if not ticket.probe:
            return await ping()  # closed: a failed ping is /readyz's to report, not a failure
        try:
            ok = await ping()
        except BaseException:  # cancelled: ping itself never raises
            self.breaker.record(ticket, Outcome.NEUTRAL)
            raise
        self.breaker.record(ticket, Outcome.SUCCESS if ok else Outcome.FAILURE)
        return ok

    async def _held(self, refused: CircuitOpen) -> Ticket:
        """The breaker refused the call: hold it for the breaker's next decision, if on.

        Raises:
            CircuitOpen: still refused after the hold (or `refused`, with no hold).
        """
        try:
            if self._hold is None:
                raise refused
            return await self._hold.admit_refused(remaining(_NO_DEADLINE_S))
        except CircuitOpen:
            self._shed("circuit_open")
            raise

    async def _timed(self, ticket: Ticket | None, call: Callable[[], Awaitable[T]]) -> T:
        start = time.perf_counter()
        try:
            result = await call()
        except BaseException as exc:
            outcome = outcome_of(exc)
            if outcome is not Outcome.NEUTRAL and self.limit is not None:
                self.limit.observe(time.perf_counter() - start)
            self._record(ticket, outcome)
            if outcome is Outcome.FAILURE:
                self.reachability.failed(exc)
            elif outcome is Outcome.SUCCESS:
                self.reachability.answered()
            raise
        if self.limit is not None:
            self.limit.observe(time.perf_counter() - start)
        self._record(ticket, Outcome.SUCCESS)
        self.reachability.answered()
        return result

    def _record(self, ticket: Ticket | None, outcome: Outcome) -> None:
        if self.breaker is not None and ticket is not None:
            self.breaker.record(ticket, outcome)

    def _shed(self, reason: str) -> None:
        for observer in self._observers:
            observer.shed(self.store, reason)
