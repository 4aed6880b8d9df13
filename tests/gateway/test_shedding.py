"""The in-flight limit and the guard's view of outcomes: engine-independent, no engine needed.

The "engine" here is a coroutine waiting on an event the test sets: ordering,
not timing, says who was refused and who waited.
"""

from __future__ import annotations

import asyncio

import pytest

from connectors.errors import EngineRejected, EngineTimeout, EngineUnavailable, QueryTooLarge
from connectors.retry import deadline_scope
from gateway.a2m.dispatcher import to_a2m_error
from gateway.resilience import (
    BreakerState,
    CircuitOpen,
    EngineGuard,
    InflightLimit,
    Overloaded,
    ResilienceConfig,
)
from gateway.resilience.config import BreakerConfig, SheddingConfig
from tests.support.resilience import FakeClock, state


async def test_a_free_slot_is_taken_at_once_and_a_waiter_gets_the_next_one() -> None:
    limit = InflightLimit(2, max_wait_s=30.0)
    await limit.acquire(10.0)
    await limit.acquire(10.0)
    waiter = asyncio.create_task(limit.acquire(10.0))
    await asyncio.sleep(0)
    assert not waiter.done()
    assert limit.waiting == 1
    limit.release()  # handed over: still two in flight
    await waiter
    assert (limit.inflight, limit.waiting) == (2, 0)
    limit.release()
    limit.release()
    assert limit.inflight == 0


async def test_waiters_are_served_first_come_first_served() -> None:
    limit = InflightLimit(3, max_wait_s=30.0)
    for _ in range(3):
        await limit.acquire(10.0)
    order: list[int] = []

    async def wait(i: int) -> None:
        await limit.acquire(10.0)
        order.append(i)

    tasks = []
    for i in range(3):
        tasks.append(asyncio.create_task(wait(i)))
        await asyncio.sleep(0)  # each joins the queue before the next
    for _ in range(3):
        limit.release()
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]


async def test_no_more_callers_wait_than_there_are_slots() -> None:
    limit = InflightLimit(2, max_wait_s=30.0)
    await limit.acquire(10.0)
    await limit.acquire(10.0)
    waiters = [asyncio.create_task(limit.acquire(10.0)) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(Overloaded):
        await limit.acquire(10.0)  # a third in the queue is refused at once
    assert all(not w.done() for w in waiters)
    limit.release()
    limit.release()
    await asyncio.gather(*waiters)


async def test_no_wait_allowed_means_refused_at_once_when_full() -> None:
    limit = InflightLimit(1, max_wait_s=0.0)
    await limit.acquire(10.0)
    with pytest.raises(Overloaded) as info:
        await limit.acquire(10.0)
    assert info.value.retry_after_ms >= 100
    assert limit.waiting == 0


async def test_a_call_that_could_not_finish_in_its_deadline_is_refused_without_waiting() -> None:
    limit = InflightLimit(1, max_wait_s=30.0)
    limit.observe(2.0)  # engine calls take about 2 s
    await limit.acquire(10.0)
    # wait ~2 s for the slot + ~2 s of its own > 3 s left: refused at once, never queued
    with pytest.raises(Overloaded) as info:
        await limit.acquire(3.0)
    assert info.value.retry_after_ms == 2000
    assert limit.waiting == 0
    # with 5 s left it is worth waiting
    waiter = asyncio.create_task(limit.acquire(5.0))
    await asyncio.sleep(0)
    assert limit.waiting == 1
    limit.release()
    await waiter
    limit.release()


async def test_the_expected_wait_beyond_max_wait_is_refused_at_once() -> None:
    limit = InflightLimit(2, max_wait_s=0.5)
    limit.observe(2.0)
    await limit.acquire(60.0)
    await limit.acquire(60.0)
    with pytest.raises(Overloaded):
        await limit.acquire(60.0)  # expected wait 1 s > max_wait 0.5 s
    assert limit.waiting == 0


async def test_a_wait_ends_at_max_wait_and_leaves_no_waiter_behind() -> None:
    limit = InflightLimit(1, max_wait_s=0.05)
    await limit.acquire(10.0)
    with pytest.raises(Overloaded):
        await limit.acquire(10.0)  # nobody releases: the bounded wait runs out
    assert limit.waiting == 0
    limit.release()
    await limit.acquire(10.0)  # the slot was not lost
    assert limit.inflight == 1


async def test_a_cancelled_waiter_loses_no_slot() -> None:
    limit = InflightLimit(1, max_wait_s=30.0)
    await limit.acquire(10.0)
    waiter = asyncio.create_task(limit.acquire(10.0))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    limit.release()
    assert (limit.inflight, limit.waiting) == (0, 0)


def test_overloaded_is_retryable_engine_trouble_on_the_wire() -> None:
    err = to_a2m_error(Overloaded(retry_after_ms=250))
    assert int(err.code) == -32603
    assert err.data == {"reason": "overloaded", "retryable": True, "retry_after_ms": 250}


# -- the guard: what counts against the engine ------------------------------------------


def guard(threshold: int = 2, clock: FakeClock | None = None) -> EngineGuard:
    config = ResilienceConfig(
        breaker=BreakerConfig(failure_threshold=threshold, open_ms=1000),
        shedding=SheddingConfig(max_inflight=4, max_wait_ms=0),
    )
    return EngineGuard("s", config, pool_size=32, clock=clock or FakeClock())


def raising(exc: BaseException):  # type: ignore[no-untyped-def]
    async def call() -> None:
        raise exc

    return call


@pytest.mark.parametrize(
    "exc",
    [EngineRejected("4xx"), QueryTooLarge("too many clauses"), ValueError("a bug here")],
)
async def test_the_callers_refusals_and_our_bugs_never_trip_it(exc: Exception) -> None:
    g = guard()
    for _ in range(5):
        with pytest.raises(type(exc)):
            await g.call(raising(exc))
    assert state(g) is BreakerState.CLOSED
    assert g.inflight == 0


@pytest.mark.parametrize("exc", [EngineUnavailable("down"), EngineTimeout("slow")])
async def test_engine_failures_and_timeouts_trip_it(exc: Exception) -> None:
    g = guard()
    for _ in range(2):
        with pytest.raises(type(exc)):
            await g.call(raising(exc))
    assert state(g) is BreakerState.OPEN


async def test_the_deadline_cancelling_a_call_counts_a_client_cancelling_it_does_not() -> None:
    g = guard(threshold=1)
    never = asyncio.Event()
    task = asyncio.create_task(g.call(never.wait))
    await asyncio.sleep(0)
    task.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await task
    assert state(g) is BreakerState.CLOSED
    with pytest.raises(EngineTimeout):
        async with deadline_scope(0.05):
            await g.call(never.wait)
    assert state(g) is BreakerState.OPEN
    assert g.inflight == 0


async def test_while_open_the_call_and_the_ping_never_run() -> None:
    g = guard(threshold=1)
    with pytest.raises(EngineUnavailable):
        await g.call(raising(EngineUnavailable("down")))
    ran: list[str] = []

    async def ping() -> bool:
        ran.append("ping")
        return True

    async def call() -> None:
        ran.append("call")

    assert await g.ping(ping) is False
    with pytest.raises(CircuitOpen) as info:
        await g.call(call)
    assert type(info.value).__name__ == "CircuitOpen"
    assert ran == []


async def test_in_half_open_the_readiness_ping_is_the_probe() -> None:
    clock = FakeClock()
    g = guard(threshold=1, clock=clock)
    with pytest.raises(EngineUnavailable):
        await g.call(raising(EngineUnavailable("down")))
    answers = iter([False, True])

    async def ping() -> bool:
        return next(answers)

    clock.now += 1.0
    assert await g.ping(ping) is False  # the probe failed: open again, for longer
    assert state(g) is BreakerState.OPEN
    clock.now += 2.0
    assert await g.ping(ping) is True
    assert state(g) is BreakerState.CLOSED
