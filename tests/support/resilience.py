"""Breaker test helpers: a clock the test moves, and a state read mypy does not narrow."""

from __future__ import annotations

from gateway.resilience import BreakerState, CircuitBreaker, EngineGuard


class FakeClock:
    """time.monotonic's stand-in: time passes only when the test says (``now += s``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def state(x: CircuitBreaker | EngineGuard) -> BreakerState:
    """The state now (a call, so the type checker does not narrow it between steps)."""
    return x.state
