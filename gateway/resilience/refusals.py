"""What the guard answers instead of calling the engine: its own small tree, not engine failures.

An engine failure (``connectors.errors``) says the engine was asked and failed; a
guard refusal says it was not asked at all. Each refusal names its wire reason
(``data.reason`` of the retryable -32603) and when to try again.
"""

from __future__ import annotations


class GuardRefusal(Exception):
    """The store's guard refused the call: the engine was not called."""

    reason = "engine_unavailable"
    """The wire's `data.reason` (gateway.a2m.errors.EngineTrouble)."""

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class CircuitOpen(GuardRefusal):
    """The store's breaker is open."""

    reason = "circuit_open"

    def __init__(self, retry_after_ms: int) -> None:
        super().__init__("the engine's circuit breaker is open", retry_after_ms)


class Overloaded(GuardRefusal):
    """Every engine slot of the store is taken and no turn comes in time."""

    reason = "overloaded"

    def __init__(self, retry_after_ms: int) -> None:
        super().__init__("the store has too many engine calls in flight", retry_after_ms)
