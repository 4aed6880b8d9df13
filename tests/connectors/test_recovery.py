"""A store back to full service with its engine: dead pooled connections, flapping, federations.

Real engines behind the soak's :class:`FaultProxy`. ``cut_upstream`` is a node restarting
behind a proxy that keeps the gateway's connections open: every pooled connection is
then dead, and the next request on each one is reset. The stores run with
``retries: 0``, so no retry of the connector's hides what a dead connection does.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from bench.soak.proxy import PASS, Fault, FaultProxy
from gateway.config import parse_config
from gateway.resilience import BreakerState, EngineGuard
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.connectors.conftest import POOL, Loaded, guarded_store
from tests.support.resilience import FakeClock, state

ENGINES = [
    pytest.param("elasticsearch", marks=[pytest.mark.elasticsearch, pytest.mark.integration]),
    pytest.param("opensearch", marks=[pytest.mark.opensearch, pytest.mark.integration]),
]
QUERY = {"query": "vitamin D deficiency"}
SETTLE_S = 10.0
"""Longest wait for the breaker to close once the node is back (its cap is 4 s)."""


async def _ok(client: InProcessClient) -> bool:
    try:
        return bool((await client.call("memory/recall", QUERY))["records"])
    except A2MRemoteError:
        return False


async def _fill_pool(client: InProcessClient, proxy: FaultProxy) -> None:
    """POOL calls at once, held at the proxy: the pool then holds POOL live connections."""
    assert await _ok(client)  # opens the store first (its own engine requests)
    proxy.hold()
    calls = [asyncio.create_task(client.call("memory/recall", QUERY)) for _ in range(POOL)]
    await proxy.wait_held(POOL)
    proxy.release()
    assert all(r["records"] for r in await asyncio.gather(*calls))


class _Load:
    """Workers calling the store back to back; each call's start time and success."""

    def __init__(self, client: InProcessClient, workers: int = 4) -> None:
        self.calls: list[tuple[float, bool]] = []
        self._more = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._worker(client)) for _ in range(workers)]

    async def _worker(self, client: InProcessClient) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.calls.append((started, await _ok(client)))
            self._more.set()
            await asyncio.sleep(0.005)

    async def wait_for(self, n: int, *, since: float) -> None:
        """Until ``n`` calls begun after ``since`` have ended (at most SETTLE_S)."""
        async with asyncio.timeout(SETTLE_S):
            while sum(started >= since for started, _ in self.calls) < n:
                self._more.clear()
                await self._more.wait()

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        self._tasks = []


@pytest.mark.parametrize("engine", ENGINES)
async def test_dead_pooled_connections_fail_no_call(engine: str, proxy: FaultProxy) -> None:
    gateway = Gateway(parse_config({"stores": {"s": guarded_store(engine, proxy.url)}}))
    client = InProcessClient(gateway.dispatcher())
    try:
        await _fill_pool(client, proxy)
        assert proxy.cut_upstream() >= POOL  # the node restarted behind the proxy
        for _ in range(2):  # no more at once than the store's in-flight limit
            assert all(await asyncio.gather(*(_ok(client) for _ in range(POOL))))
        assert proxy.counts["upstream_closed"] >= POOL  # each dead connection was met, once
        assert state(gateway.stores["s"].guard) is BreakerState.CLOSED
    finally:
        await gateway.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_after_an_outage_every_call_succeeds_once_settled(
    engine: str, proxy: FaultProxy
) -> None:
    gateway = Gateway(parse_config({"stores": {"s": guarded_store(engine, proxy.url)}}))
    client = InProcessClient(gateway.dispatcher())
    guard = gateway.stores["s"].guard
    opened: list[float] = []
    is_open, is_closed = asyncio.Event(), asyncio.Event()

    def moved(before: BreakerState, after: BreakerState) -> None:
        if after is BreakerState.OPEN:
            opened.append(time.monotonic())
            is_open.set()
        if after is BreakerState.CLOSED:
            is_closed.set()

    assert guard.breaker is not None
    guard.breaker.on_transition(moved)
    load: _Load | None = None
    try:
        await _fill_pool(client, proxy)
        load = _Load(client)
        await asyncio.sleep(0.5)
        proxy.fault = Fault("reset")  # the node dies under the load ...
        proxy.cut_upstream()
        await asyncio.wait_for(is_open.wait(), SETTLE_S)
        await asyncio.sleep(1.0)
        proxy.fault = PASS  # ... and is back; the idle pooled connections still lead nowhere
        back = time.monotonic()
        await asyncio.wait_for(is_closed.wait(), SETTLE_S)
        settled = time.monotonic()
        await asyncio.sleep(1.0)
        await load.wait_for(8, since=settled)  # a loaded machine may serve fewer in 1 s
        await load.stop()  # the calls still under way end first, and count
        window = [ok for started, ok in load.calls if started >= settled]
        assert all(window), f"{window.count(False)} of {len(window)} calls failed"
        assert not [t for t in opened if t >= back]  # no re-open once the node was back
    finally:
        proxy.fault = PASS
        if load is not None:
            await load.stop()
        await gateway.close()


@pytest.mark.opensearch
@pytest.mark.integration
@pytest.mark.parametrize("engine", ["opensearch"])
async def test_a_federation_sees_its_member_back_with_the_store(
    engine: str, proxy: FaultProxy, os_loaded: Loaded
) -> None:
    cfg = parse_config(
        {
            "stores": {
                "a": guarded_store(engine, proxy.url, breaker={"failure_threshold": 2}),
                "b": guarded_store(engine, os_loaded.url),  # straight to the node
            },
            "federations": {"both": {"members": ["a", "b"]}},
        }
    )
    gateway = Gateway(cfg)
    clock = FakeClock()
    gateway.stores["a"].guard = EngineGuard("a", cfg.stores["a"].resilience, POOL, clock=clock)
    store = InProcessClient(gateway.dispatcher("a"))
    federation = InProcessClient(gateway.dispatcher("both"))
    member = gateway.federations["both"].members[0].store
    try:
        assert member.guard is gateway.stores["a"].guard  # one breaker, not a copy
        assert not (await federation.call("memory/recall", QUERY)).get("left_out")
        proxy.fault = Fault("reset")
        assert not await _ok(store)
        assert not await _ok(store)
        assert state(member.guard) is BreakerState.OPEN
        out = await federation.call("memory/recall", QUERY)
        assert out["left_out"] == [{"member": "a", "reason": "circuit_open"}]

        proxy.fault = PASS
        clock.now += 1.0
        assert await _ok(store)  # the store's own call is the probe, and closes it
        assert not (await federation.call("memory/recall", QUERY)).get("left_out")

        proxy.fault = Fault("reset")  # and the other way round
        assert not await _ok(store)
        assert not await _ok(store)
        proxy.fault = PASS
        clock.now += 1.0
        assert not (await federation.call("memory/recall", QUERY)).get("left_out")  # the probe
        assert state(gateway.stores["a"].guard) is BreakerState.CLOSED
    finally:
        proxy.fault = PASS
        await gateway.close()
