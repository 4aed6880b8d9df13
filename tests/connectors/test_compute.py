"""Compute threads are nicer than the loop's thread, and only they are."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from connectors.compute import NICENESS, compute_executor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread priority: Linux")


def _priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_worker_is_nicer_and_the_caller_keeps_its_priority() -> None:
    caller = _priority()
    process = os.getpriority(os.PRIO_PROCESS, 0)
    executor = compute_executor("test-compute")
    try:
        worker, name = executor.submit(
            lambda: (_priority(), threading.current_thread().name)
        ).result(timeout=10)
    finally:
        executor.shutdown()
    assert worker == min(19, caller + NICENESS)
    assert name.startswith("test-compute")
    assert _priority() == caller
    assert os.getpriority(os.PRIO_PROCESS, 0) == process
