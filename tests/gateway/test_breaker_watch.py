"""The guard's watcher: while the breaker is open it pings the engine, never more often
than ``watch_ms``, and its first good answer lets the next call probe (no engine here:
the ping is a stand-in whose answers the test sets)."""

from __future__ import annotations

import asyncio

import pytest

from connectors.errors import EngineUnavailable
from gateway.resilience import BreakerState, CircuitOpen, EngineGuard, ResilienceConfig
from tests.support.resilience import state


class Ping:
    def __init__(self) -> None:
        self.up = False
        self.calls = 0

    async def __call__(self) -> bool:
        self.calls += 1
        return self.up


def guard(watch_ms: int, open_ms: int = 60_000) -> EngineGuard:
    config = ResilienceConfig.model_validate(
        {
            "breaker": {
                "failure_threshold": 1,
                "open_ms": open_ms,
                "max_open_ms": open_ms,
                "watch_ms": watch_ms,
            }
        }
    )
    return EngineGuard("s", config, 4)


async def down() -> None:
    raise EngineUnavailable("down")


async def up() -> str:
    return "ok"


async def test_the_first_good_ping_lets_the_next_call_through() -> None:
    g, ping = guard(watch_ms=20), Ping()
    g.watch(ping)
    with pytest.raises(EngineUnavailable):
        await g.call(down)
    with pytest.raises(CircuitOpen):  # a minute's wait: only the watcher can end it
        await g.call(up)
    await asyncio.sleep(0.1)
    assert ping.calls >= 2  # it kept asking while the engine stayed down
    assert state(g) is BreakerState.OPEN
    ping.up = True
    for _ in range(50):
        if state(g) is not BreakerState.OPEN:
            break
        await asyncio.sleep(0.02)
    assert state(g) is BreakerState.HALF_OPEN
    asked = ping.calls
    assert await g.call(up) == "ok"  # the probe
    assert state(g) is BreakerState.CLOSED
    await asyncio.sleep(0.1)
    assert ping.calls == asked  # closed: no more pings


async def test_pings_keep_their_pace() -> None:
    g, ping = guard(watch_ms=50), Ping()
    g.watch(ping)
    with pytest.raises(EngineUnavailable):
        await g.call(down)
    await asyncio.sleep(0.32)
    g.stop_watching()
    assert 2 <= ping.calls <= 7  # about one per 50 ms, never a busy loop


async def test_watch_ms_0_leaves_only_the_timed_wait() -> None:
    g, ping = guard(watch_ms=0), Ping()
    g.watch(ping)
    ping.up = True
    with pytest.raises(EngineUnavailable):
        await g.call(down)
    await asyncio.sleep(0.05)
    assert ping.calls == 0
    assert state(g) is BreakerState.OPEN


async def test_no_pings_once_a_check_triggered_probe_failed() -> None:
    g, ping = guard(watch_ms=20), Ping()
    g.watch(ping)
    ping.up = True  # pings answer, searches fail
    with pytest.raises(EngineUnavailable):
        await g.call(down)
    for _ in range(50):
        if state(g) is BreakerState.HALF_OPEN:
            break
        await asyncio.sleep(0.02)
    with pytest.raises(EngineUnavailable):
        await g.call(down)  # the probe the ping let in fails
    assert state(g) is BreakerState.OPEN
    asked = ping.calls
    await asyncio.sleep(0.15)
    assert ping.calls == asked  # only the timed wait ends this opening: nothing to ask
    g.stop_watching()
