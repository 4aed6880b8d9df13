"""How the event loop shares the interpreter with the threads a store computes on.

Qdrant on qdrant-edge (one worker thread) and a local query embedder run Python off
the loop, but hold the GIL while they compute; each time the loop wakes it waits
for the GIL up to the interpreter's switch interval (5 ms by default). Measured
with one pure-Python worker thread on this 2-core machine (load average ~22):
loop lag p50 17-18 ms at 5 ms, 0.7-9.8 ms at 1 ms (docs/benchmarks.md). With the
worker threads also nicer than the loop's (connectors/compute.py), 0.5 ms took the
demo's /healthz p99 at concurrency 8 from 5.1-5.8 ms (1 ms) to 3.8-4.2 ms; alone,
without the nicer threads, 0.5 or 0.2 ms changed nothing (7.4-7.5 ms, httpx prober)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Final

from gateway.config import EmbedderKind, StoreConfig

log = logging.getLogger(__name__)

SWITCH_INTERVAL_S: Final = 0.0005
"""The GIL hand-over interval while a store computes in this process."""


def computes_in_process(store: StoreConfig) -> bool:
    """Whether serving the store runs engine or model code in this process."""
    local_engine = store.connection.local
    local_model = store.search.embedder.kind in (EmbedderKind.LOCAL, EmbedderKind.MINILM)
    return local_engine or local_model


def favour_the_loop(stores: Iterable[StoreConfig]) -> None:
    """Shorten the GIL switch interval when a served store computes in this process."""
    if any(computes_in_process(s) for s in stores) and sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        log.debug("GIL switch interval set to %s s", SWITCH_INTERVAL_S)
