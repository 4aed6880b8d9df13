"""The shared rate limit's view of Redis: one probe per retry window, one log line a minute."""

from __future__ import annotations

import logging

import pytest

from gateway.security.ratelimit.health import LOG_INTERVAL_S, BackendHealth


def test_while_down_one_call_probes_per_retry_window() -> None:
    health = BackendHealth(retry_after_s=1.0, on_error="local")
    assert health.asks(0.0, probe_s=0.1)
    health.failed("connection", "ConnectionError", 0.0)
    assert not health.asks(0.5, probe_s=0.1)  # inside the window: decided without Redis
    assert health.asks(1.0, probe_s=0.1)  # the probe
    assert not health.asks(1.05, probe_s=0.1)  # the others, while the probe is out
    health.answered()
    assert health.asks(1.06, probe_s=0.1)
    assert health.errors == {"connection": 1}


def test_failures_are_logged_once_a_minute_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.security.ratelimit")
    health = BackendHealth(retry_after_s=1.0, on_error="closed")
    for t in range(200):
        health.failed("timeout", "TimeoutError", float(t) * 0.5)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 + int(199 * 0.5 // LOG_INTERVAL_S)  # 0 s and 60 s
    assert "on_error=closed" in lines[0]
    assert "more failures since the last line" in lines[-1]
    health.answered()
    assert caplog.records[-1].getMessage().startswith("rate limit: Redis answers again")
    assert health.errors == {"timeout": 200}
