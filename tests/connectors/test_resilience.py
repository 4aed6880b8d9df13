"""Circuit breaking and load shedding against real engines, behind a proxy that counts requests.

The store reads the shared SciFact index through :class:`FaultProxy` (the soak's), which
can drop every connection (the node died) or hold every request until the test
releases it (a slow node). Its request count proves what the gateway never sent.
The breaker runs on an injected clock, so "the open period has passed" is a
step of the test, not a wait.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from bench.soak.proxy import Fault, FaultProxy
from gateway.config import parse_config
from gateway.resilience import BreakerState, EngineGuard
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.connectors.conftest import Loaded, guarded_store
from tests.support.asgi import asgi_client
from tests.support.resilience import FakeClock, state
from tests.support.wire import assert_valid

ENGINES = [
    pytest.param("elasticsearch", marks=[pytest.mark.elasticsearch, pytest.mark.integration]),
    pytest.param("opensearch", marks=[pytest.mark.opensearch, pytest.mark.integration]),
]
QUERY = {"query": "vitamin D deficiency"}


async def _error(client: InProcessClient, params: dict[str, Any] = QUERY) -> dict[str, Any]:
    with pytest.raises(A2MRemoteError) as info:
        await client.call("memory/recall", params)
    err = {"code": info.value.code, "message": str(info.value), "data": info.value.data}
    if err["code"] == -32603:
        assert_valid("error", {"code": err["code"], "message": "m", "data": err["data"]})
    return err


def _sample(metrics_text: str, name: str) -> str:
    lines = [ln for ln in metrics_text.splitlines() if ln.startswith(name)]
    assert len(lines) == 1, (name, lines)
    return lines[0].rsplit(" ", 1)[1]


@pytest.mark.parametrize("engine", ENGINES)
async def test_the_breaker_opens_answers_at_once_probes_and_closes(
    engine: str, proxy: FaultProxy
) -> None:
    # hold_ms 0: refusals answer at once (the hold is tests/gateway/test_breaker_hold.py);
    # with the test's clock nothing would move the breaker during a hold anyway.
    store = guarded_store(
        engine, proxy.url, breaker={"failure_threshold": 3, "open_ms": 250, "hold_ms": 0}
    )
    cfg = parse_config({"stores": {"s": store}})
    gateway = Gateway(cfg)
    clock = FakeClock()
    gateway.stores["s"].guard = EngineGuard("s", cfg.stores["s"].resilience, 8, clock=clock)
    http = asgi_client(gateway)
    client = InProcessClient(gateway.dispatcher())
    guard = gateway.stores["s"].guard
    try:
        assert (await client.call("memory/recall", QUERY))["records"]
        assert (await http.get("/readyz")).status_code == 200

        proxy.fault = Fault("reset")  # the node dies
        for _ in range(3):
            before = proxy.requests
            err = await _error(client)
            assert err["data"]["reason"] == "engine_unavailable", err
            assert proxy.requests > before  # these did reach the "engine"
        assert state(guard) is BreakerState.OPEN

        before = proxy.requests
        err = await _error(client)
        assert err["code"] == -32603
        assert err["data"] == {"reason": "circuit_open", "retryable": True, "retry_after_ms": 250}
        clock.now += 0.125  # binary fractions: the clock's sums are exact
        assert (await _error(client))["data"]["retry_after_ms"] == 125
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["stores"] == {"s": False}
        assert ready.json()["breakers"] == {"s": "open"}
        assert proxy.requests == before  # neither the calls nor /readyz touched the engine
        text = (await http.get("/metrics")).text
        assert _sample(text, 'a2m_engine_breaker_state{store="s"}') == "2.0"
        assert (
            _sample(text, 'a2m_engine_shed_calls_total{reason="circuit_open",store="s"}') == "2.0"
        )

        clock.now += 0.125  # the open period is over: the next call is the probe
        err = await _error(client)
        assert err["data"]["reason"] == "engine_unavailable"
        assert proxy.requests == before + 1
        err = await _error(client)  # the failed probe re-opened it, for twice as long
        assert err["data"] == {"reason": "circuit_open", "retryable": True, "retry_after_ms": 500}
        assert proxy.requests == before + 1

        clock.now += 0.5
        proxy.hold()  # the node is back, slowly: the probe is under way ...
        probe = asyncio.create_task(client.call("memory/recall", QUERY))
        await proxy.wait_held(1)
        assert state(guard) is BreakerState.HALF_OPEN
        err = await _error(client)  # ... and only the probe goes through
        assert err["data"]["reason"] == "circuit_open"
        assert proxy.requests == before + 2
        proxy.release()
        assert (await probe)["records"]
        assert state(guard) is BreakerState.CLOSED
        assert (await client.call("memory/recall", QUERY))["records"]
        ready = await http.get("/readyz")
        assert ready.status_code == 200
        assert "breakers" not in ready.json()

        text = (await http.get("/metrics")).text
        assert _sample(text, 'a2m_engine_breaker_state{store="s"}') == "0.0"
        moves = {
            (f, t): _sample(
                text, f'a2m_engine_breaker_transitions_total{{from="{f}",store="s",to="{t}"}}'
            )
            for f, t in [
                ("closed", "open"),
                ("open", "half_open"),
                ("half_open", "open"),
                ("half_open", "closed"),
            ]
        }
        assert moves == {
            ("closed", "open"): "1.0",
            ("open", "half_open"): "2.0",
            ("half_open", "open"): "1.0",
            ("half_open", "closed"): "1.0",
        }
    finally:
        proxy.release()
        await http.aclose()
        await gateway.close()


@pytest.mark.opensearch
@pytest.mark.integration
@pytest.mark.parametrize("engine", ["opensearch"])
async def test_the_callers_own_bad_query_never_trips_the_breaker(
    engine: str, proxy: FaultProxy
) -> None:
    store = guarded_store(engine, proxy.url, breaker={"failure_threshold": 2})
    store["limits"] = {"max_query_length": 10_000}
    gateway = Gateway(parse_config({"stores": {"s": store}}))
    client = InProcessClient(gateway.dispatcher())
    too_many_terms = {"query": " ".join(f"w{i}" for i in range(800))}  # x2 fields > 1024
    try:
        assert (await client.call("memory/recall", QUERY))["records"]  # opened
        for _ in range(4):
            before = proxy.requests
            err = await _error(client, too_many_terms)
            assert err["code"] == -32602, err
            assert err["data"]["reason"] == "query_too_large"
            assert proxy.requests == before + 1  # the engine was asked each time
        assert state(gateway.stores["s"].guard) is BreakerState.CLOSED
        assert (await client.call("memory/recall", QUERY))["records"]
    finally:
        await gateway.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_burst_on_a_slow_engine_is_shed_at_once_not_queued(
    engine: str, proxy: FaultProxy
) -> None:
    store = guarded_store(engine, proxy.url, shedding={"max_inflight": 2, "max_wait_ms": 200})
    deadline_s = store["request_timeout_ms"] / 1000
    gateway = Gateway(parse_config({"stores": {"s": store}}))
    client = InProcessClient(gateway.dispatcher())
    guard = gateway.stores["s"].guard
    try:
        assert (await client.call("memory/recall", QUERY))["records"]  # opened, warm
        proxy.hold()  # the engine turns slow
        before = proxy.requests
        done: list[tuple[str, Any]] = []
        elapsed: list[float] = []
        eight_refused = asyncio.Event()

        async def one() -> None:
            start = time.monotonic()
            try:
                done.append(("ok", await client.call("memory/recall", QUERY)))
            except A2MRemoteError as exc:
                done.append(("refused", {"code": exc.code, "data": exc.data}))
                if len(done) == 8:
                    eight_refused.set()
            finally:
                elapsed.append(time.monotonic() - start)

        burst = [asyncio.create_task(one()) for _ in range(10)]
        await proxy.wait_held(2)
        async with asyncio.timeout(30):  # the refusals come back while the engine holds two
            await eight_refused.wait()
        assert proxy.requests == before + 2  # the refused calls never reached the engine
        assert guard.inflight == 2
        for kind, err in done:
            assert kind == "refused"
            assert err["code"] == -32603
            assert err["data"]["reason"] == "overloaded"
            assert err["data"]["retryable"] is True
            assert err["data"]["retry_after_ms"] > 0
        proxy.release()
        await asyncio.gather(*burst)
        assert [kind for kind, _ in done] == ["refused"] * 8 + ["ok"] * 2
        assert proxy.requests == before + 2
        assert max(elapsed) < deadline_s + 1.0  # no call outlived its deadline (+1 s slack)
        assert guard.inflight == 0
        assert state(guard) is BreakerState.CLOSED  # shedding is not an engine failure
    finally:
        proxy.release()
        await gateway.close()


@pytest.mark.opensearch
@pytest.mark.integration
@pytest.mark.parametrize("engine", ["opensearch"])
async def test_a_federation_leaves_out_the_member_whose_breaker_is_open(
    engine: str, proxy: FaultProxy, os_loaded: Loaded
) -> None:
    failing = guarded_store(engine, proxy.url, breaker={"failure_threshold": 1})
    healthy = guarded_store(engine, proxy.url)
    healthy["connection"]["hosts"] = [os_loaded.url]  # straight to the node
    cfg = parse_config(
        {
            "stores": {"failing": failing, "healthy": healthy},
            "federations": {"both": {"members": ["failing", "healthy"]}},
        }
    )
    gateway = Gateway(cfg)
    client = InProcessClient(gateway.dispatcher("both"))
    try:
        assert not (await client.call("memory/recall", QUERY)).get("left_out")
        proxy.fault = Fault("reset")
        first = await client.call("memory/recall", QUERY)
        assert first["left_out"] == [{"member": "failing", "reason": "engine_unavailable"}]
        before = proxy.requests
        second = await client.call("memory/recall", QUERY)
        assert second["left_out"] == [{"member": "failing", "reason": "circuit_open"}]
        assert second["records"]  # the healthy member still answers
        assert proxy.requests == before
    finally:
        await gateway.close()
