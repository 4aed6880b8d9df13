"""Circuit breaking and load shedding in front of each store's engine (docs/operations.md).

The store runs every engine call through its :class:`EngineGuard`: the breaker
answers at once while the engine is known to be failing (after a brief hold for its
next decision), and the in-flight limit
refuses a call that would wait past its deadline. Connectors know nothing of it.
"""

from gateway.resilience.breaker import BreakerState, CircuitBreaker
from gateway.resilience.config import BreakerConfig, ResilienceConfig, SheddingConfig
from gateway.resilience.guard import EngineGuard, GuardObserver
from gateway.resilience.hold import unheld
from gateway.resilience.refusals import CircuitOpen, GuardRefusal, Overloaded
from gateway.resilience.shedding import InflightLimit

__all__ = [
    "BreakerConfig",
    "BreakerState",
    "CircuitBreaker",
    "CircuitOpen",
    "EngineGuard",
    "GuardObserver",
    "GuardRefusal",
    "InflightLimit",
    "Overloaded",
    "ResilienceConfig",
    "SheddingConfig",
    "unheld",
]
