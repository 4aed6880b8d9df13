"""bench.ratelimit_cost still runs end to end on a real redis-server (shape, not figures)."""

from __future__ import annotations

import asyncio

import pytest

from bench.ratelimit_cost import measure, table
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.integration


def test_the_rate_limit_cost_harness_measures_every_way(redis_server: RedisServer) -> None:
    results = asyncio.run(measure(redis_server, calls=50, rounds=1))
    assert list(results) == ["none", "memory", "loopback PING", "redis"]
    (shared,) = results["redis"]
    assert shared.p50_us > 0
    assert shared.redis_cpu_us >= 0
    text = table(results, 50, 1, "0 / 0")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows] == [
        "way",
        "none",
        "memory",
        "loopback PING",
        "redis",
    ]
