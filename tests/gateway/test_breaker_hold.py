"""The breaker's hold: a call that meets an open breaker waits, briefly, for its next
decision instead of being refused at once (no engine here: the calls and the ping are
stand-ins whose answers the test sets; the clock is the real one)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from connectors.errors import EngineUnavailable
from connectors.retry import deadline_scope
from gateway.resilience import (
    BreakerState,
    CircuitOpen,
    EngineGuard,
    ResilienceConfig,
    unheld,
)
from tests.support.resilience import state


class Ping:
    def __init__(self) -> None:
        self.up = False

    async def __call__(self) -> bool:
        return self.up


class Shed:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def breaker_transition(self, store: str, before: BreakerState, after: BreakerState) -> None:
        pass

    def shed(self, store: str, reason: str) -> None:
        self.reasons.append(reason)


def guard(*, hold_ms: int, open_ms: int = 60_000, watch_ms: int = 0) -> EngineGuard:
    breaker: dict[str, Any] = {
        "failure_threshold": 1,
        "open_ms": open_ms,
        "max_open_ms": open_ms,
        "watch_ms": watch_ms,
        "hold_ms": hold_ms,
    }
    return EngineGuard("s", ResilienceConfig.model_validate({"breaker": breaker}), 8)


async def down() -> None:
    raise EngineUnavailable("down")


async def up() -> str:
    return "ok"


async def open_it(g: EngineGuard) -> None:
    with pytest.raises(EngineUnavailable):
        await g.call(down)
    assert state(g) is BreakerState.OPEN


async def comes_back(ping: Ping, after_s: float) -> None:
    await asyncio.sleep(after_s)
    ping.up = True


async def test_a_call_held_across_the_good_ping_is_served() -> None:
    g, ping = guard(hold_ms=1_000, watch_ms=20), Ping()
    g.watch(ping)
    await open_it(g)
    back = asyncio.create_task(comes_back(ping, 0.1))
    start = time.monotonic()
    assert await g.call(up) == "ok"  # a minute's timed wait: only the ping ended it
    assert 0.08 <= time.monotonic() - start < 1.0
    assert state(g) is BreakerState.CLOSED
    await back
    g.stop_watching()


async def test_without_the_hold_the_same_call_is_refused() -> None:
    g, ping = guard(hold_ms=0, watch_ms=20), Ping()
    g.watch(ping)
    await open_it(g)
    back = asyncio.create_task(comes_back(ping, 0.1))
    with pytest.raises(CircuitOpen):
        await g.call(up)
    await back
    g.stop_watching()


async def test_a_federation_fan_out_is_not_held() -> None:
    # Same as the first test, from inside a fan-out (unheld): left out at once instead.
    g, ping = guard(hold_ms=1_000, watch_ms=20), Ping()
    g.watch(ping)
    await open_it(g)
    back = asyncio.create_task(comes_back(ping, 0.1))
    start = time.monotonic()
    with unheld(), pytest.raises(CircuitOpen):
        await asyncio.create_task(g.call(up))  # a task started in the block: unheld too
    assert time.monotonic() - start < 0.08
    await back
    g.stop_watching()


async def test_a_call_held_to_the_timed_wait_is_the_probe() -> None:
    g = guard(hold_ms=1_000, open_ms=150)
    await open_it(g)
    start = time.monotonic()
    assert await g.call(up) == "ok"
    assert 0.1 <= time.monotonic() - start < 1.0
    assert state(g) is BreakerState.CLOSED


async def test_nothing_can_decide_within_the_hold_so_it_refuses_at_once() -> None:
    # A minute's timed wait and no watcher: holding would only add latency.
    g, shed = guard(hold_ms=5_000), Shed()
    g.observe(shed)
    await open_it(g)
    start = time.monotonic()
    with pytest.raises(CircuitOpen) as refused:
        await g.call(up)
    assert time.monotonic() - start < 0.5
    assert refused.value.retry_after_ms > 50_000
    assert shed.reasons == ["circuit_open"]


async def test_calls_during_the_probe_wait_for_its_outcome() -> None:
    g = guard(hold_ms=2_000, open_ms=100)
    await open_it(g)
    await asyncio.sleep(0.15)
    release = asyncio.Event()

    async def slow() -> str:
        await release.wait()
        return "probe"

    probe = asyncio.create_task(g.call(slow))
    await asyncio.sleep(0.02)
    assert state(g) is BreakerState.HALF_OPEN
    held = [asyncio.create_task(g.call(up)) for _ in range(5)]
    await asyncio.sleep(0.1)
    assert not any(t.done() for t in held)  # waiting on the probe, not refused
    release.set()
    assert await probe == "probe"
    assert await asyncio.gather(*held) == ["ok"] * 5


async def test_after_a_failed_probe_the_waiters_are_held_to_the_next_one() -> None:
    g = guard(hold_ms=2_000, open_ms=100)
    await open_it(g)
    await asyncio.sleep(0.15)
    release = asyncio.Event()

    async def slow_failure() -> None:
        await release.wait()
        raise EngineUnavailable("still down")

    probe = asyncio.create_task(g.call(slow_failure))
    await asyncio.sleep(0.02)
    held = [asyncio.create_task(g.call(up)) for _ in range(3)]
    await asyncio.sleep(0.05)
    start = time.monotonic()
    release.set()
    with pytest.raises(EngineUnavailable):
        await probe
    # Re-opened for another 100 ms, within their hold: one waiter is the next probe, it
    # succeeds, and the others go on once it has closed the breaker.
    assert await asyncio.gather(*held) == ["ok"] * 3
    assert 0.08 <= time.monotonic() - start < 2.0
    assert state(g) is BreakerState.CLOSED


async def test_a_probe_whose_caller_went_away_lets_a_waiter_probe() -> None:
    g = guard(hold_ms=2_000, open_ms=100)
    await open_it(g)
    await asyncio.sleep(0.15)
    never = asyncio.Event()

    async def hangs() -> None:
        await never.wait()

    probe = asyncio.create_task(g.call(hangs))
    await asyncio.sleep(0.02)
    held = asyncio.create_task(g.call(up))
    await asyncio.sleep(0.05)
    probe.cancel()  # the probe's caller is gone: nothing learned, no transition
    start = time.monotonic()
    assert await held == "ok"  # it took the freed probe slot
    assert time.monotonic() - start < 1.0
    assert state(g) is BreakerState.CLOSED


async def test_the_hold_takes_at_most_half_the_deadline() -> None:
    g, ping = guard(hold_ms=5_000, watch_ms=20), Ping()  # the ping never answers up
    g.watch(ping)
    await open_it(g)
    start = time.monotonic()
    with pytest.raises(CircuitOpen):
        async with deadline_scope(0.4):
            await g.call(up)
    assert 0.15 <= time.monotonic() - start < 0.35
    g.stop_watching()
