"""One log line per change of an engine's reachability, not one per failed attempt.

The engine clients log a WARNING for every attempt against a node that is down
(``elastic_transport``: "has failed for N times in a row"); the gateway keeps
them quiet and says once that a store's engine cannot be reached, and why, then
once that it answers again.
"""

from __future__ import annotations

import logging

from connectors.reach import why_unreachable

log = logging.getLogger("a2m.engine")


class ReachabilityLog:
    """Tracks whether one store's engine answers; logs only when that changes."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.down = False

    def failed(self, exc: BaseException) -> None:
        """An engine call failed for the engine's sake (unreachable, no answer in time)."""
        if self.down:
            return
        self.down = True
        why = why_unreachable(exc) or "it did not answer"
        log.warning(
            "store %s: its engine cannot be reached: %s; reads answer engine_unavailable "
            "until it answers again",
            self.store,
            why,
        )

    def answered(self) -> None:
        """An engine call was answered (whatever the answer)."""
        if self.down:
            self.down = False
            log.info("store %s: its engine answers again", self.store)
