"""The worker thread that in-process engine or model code computes on.

Qdrant in process (qdrant-edge) and the local query embedders compute off the
event loop, on one thread each. On a machine with few cores that thread and the
loop's thread compete for a CPU as well as for the GIL; the worker is made the
nicer of the two (Linux, where a priority can be set per thread), so the loop is
scheduled first when both are runnable and a request waiting for it (``/healthz``,
another store's recall) is not queued behind the computation. Measured on the
2-core machine with the demo at concurrency 8 (docs/benchmarks.md): /healthz p99
5.5-6.3 ms before, 3.8-4.2 ms with this and the 0.5 ms switch interval, recall p50
unchanged.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Final

log = logging.getLogger(__name__)

NICENESS: Final = 10
"""How much nicer than the loop's thread a compute thread is (0-19 more)."""


def _be_nicer() -> None:
    """Lower the calling thread's scheduling priority; the rest of the process keeps its."""
    if sys.platform != "linux":
        return  # elsewhere setpriority(PRIO_PROCESS, …) would renice the whole process
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + NICENESS)
    except OSError as exc:  # a sandbox may refuse it: run at the normal priority
        log.debug("compute thread keeps its priority: %s", exc)


def compute_executor(name: str) -> ThreadPoolExecutor:
    """One worker thread named ``name``, nicer than the event loop's."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=_be_nicer)
