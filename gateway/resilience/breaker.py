"""A circuit breaker: stop calling an engine that keeps failing, and probe it to come back.

::

    closed --failure_threshold consecutive failures within window--> open
    open   --open for open_s (doubled per failed probe, up to max_open_s)--> half-open
    half-open: one probe passes; it succeeds -> closed, it fails -> open again

A health check may end an opening early (``probe_now``: the guard's watcher saw the
engine answer a ping), once per opening: if the probe it let through fails, only the
timed wait ends that opening, so a ping that answers while searches fail cannot make
the breaker flap.

Only the probe decides in half-open, and only calls admitted since the breaker last
closed count against it once closed: a call admitted before it opened that ends after
it opened, or after it closed again, changes nothing. So once a probe has closed it,
only ``failure_threshold`` new failures re-open it. The clock is injected (tests).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum

from gateway.resilience.refusals import CircuitOpen

Clock = Callable[[], float]
TransitionHook = Callable[["BreakerState", "BreakerState"], None]
"""(from, to): the metrics module counts transitions."""


class BreakerState(IntEnum):
    """Ordered by severity, so the gauge's value alone says how bad it is."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2

    @property
    def label(self) -> str:
        return self.name.lower()


class Outcome(Enum):
    """What one engine call says about the engine's health."""

    SUCCESS = "success"
    """The engine answered (a refusal of the caller's query included)."""
    FAILURE = "failure"
    """Unreachable, 429/5xx after retries, or no answer before the deadline."""
    NEUTRAL = "neutral"
    """Nothing learned: the caller went away, or a bug on this side."""


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    failure_threshold: int = 5
    window_s: float = 10.0
    open_s: float = 1.0
    max_open_s: float = 4.0


@dataclass(frozen=True, slots=True)
class Ticket:
    """Handed out by admit(); give it back to record()."""

    probe: bool
    closing: int = 0
    """How many times the breaker had closed when the call was admitted."""


_PROBE = Ticket(probe=True)


class CircuitBreaker:
    def __init__(self, policy: BreakerPolicy, clock: Clock = time.monotonic) -> None:
        self._policy = policy
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._streak_start = 0.0
        self._open_for = policy.open_s
        self._probe_at = 0.0
        self._probing = False
        self._call = Ticket(probe=False)
        self._hooks: list[TransitionHook] = []
        self._check_trusted = True

    def on_transition(self, hook: TransitionHook) -> None:
        self._hooks.append(hook)

    @property
    def state(self) -> BreakerState:
        """The state now: an open breaker whose wait has passed is half-open."""
        if self._state is BreakerState.OPEN and self._clock() >= self._probe_at:
            self._move(BreakerState.HALF_OPEN)
        return self._state

    @property
    def waiting(self) -> bool:
        """Open, its timed wait not yet over (read without moving to half-open)."""
        return self._state is BreakerState.OPEN and self._clock() < self._probe_at

    @property
    def wait_left_s(self) -> float:
        """Seconds until the timed wait ends (0 when not waiting)."""
        return max(0.0, self._probe_at - self._clock()) if self.waiting else 0.0

    @property
    def heeds_checks(self) -> bool:
        """Waiting, and a health check could still end this opening (``probe_now``)."""
        return self._check_trusted and self.waiting

    def probe_now(self) -> bool:
        """A health check says the engine answers again: end the wait, so the next call is
        the probe. Trusted once per opening; False when it changed nothing."""
        if not self.heeds_checks:
            return False
        self._check_trusted = False  # until a probe closes the breaker
        self._probe_at = self._clock()
        self._move(BreakerState.HALF_OPEN)
        return True

    def retry_after_ms(self) -> int:
        """How long a refused caller should wait: until the probe, or one open period."""
        if self.state is BreakerState.OPEN:
            return max(1, math.ceil((self._probe_at - self._clock()) * 1000))
        return max(1, math.ceil(self._policy.open_s * 1000))

    def admit(self) -> Ticket:
        """Let one call through, or refuse it.

        Raises:
            CircuitOpen: open, or half-open with its probe already under way.
        """
        state = self.state
        if state is BreakerState.CLOSED:
            return self._call
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            return _PROBE
        raise CircuitOpen(self.retry_after_ms())

    def record(self, ticket: Ticket, outcome: Outcome) -> None:
        """What the call admitted with `ticket` taught about the engine."""
        if ticket.probe:
            self._probing = False
            if outcome is Outcome.SUCCESS:
                self._close()
            elif outcome is Outcome.FAILURE:
                self._open_for = min(self._open_for * 2, self._policy.max_open_s)
                self._open()
            return
        if (
            self._state is not BreakerState.CLOSED
            or outcome is Outcome.NEUTRAL
            or ticket.closing != self._call.closing
        ):
            return  # not closed, nothing learned, or admitted before the breaker last closed
        if outcome is Outcome.SUCCESS:
            self._failures = 0
            return
        now = self._clock()
        if self._failures == 0 or now - self._streak_start > self._policy.window_s:
            self._failures, self._streak_start = 0, now
        self._failures += 1
        if self._failures >= self._policy.failure_threshold:
            self._open()

    def _open(self) -> None:
        self._failures = 0
        self._probe_at = self._clock() + self._open_for
        self._move(BreakerState.OPEN)

    def _close(self) -> None:
        self._failures = 0
        self._check_trusted = True
        self._call = Ticket(probe=False, closing=self._call.closing + 1)
        self._open_for = self._policy.open_s
        self._move(BreakerState.CLOSED)

    def _move(self, to: BreakerState) -> None:
        before, self._state = self._state, to
        if before is not to:
            for hook in self._hooks:
                hook(before, to)
