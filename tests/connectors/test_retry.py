"""retry_read honours an engine's Retry-After: never sooner, and not past the deadline."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from bench.soak.proxy import Fault, FaultProxy, relay_to
from connectors.retry import deadline_scope, retry_read
from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.connectors.conftest import INDEX, Loaded

ENGINES = [
    pytest.param(
        "es_loaded", marks=[pytest.mark.integration, pytest.mark.elasticsearch], id="elasticsearch"
    ),
    pytest.param(
        "os_loaded", marks=[pytest.mark.integration, pytest.mark.opensearch], id="opensearch"
    ),
]


class Busy(Exception):
    def __init__(self, retry_after_s: float | None) -> None:
        super().__init__("busy")
        self.retry_after_s = retry_after_s


def _asked(exc: BaseException) -> float | None:
    return exc.retry_after_s if isinstance(exc, Busy) else None


def _calls(*failures: Busy) -> tuple[list[float], Callable[[], Awaitable[str]]]:
    """A call that raises ``failures`` in turn, then answers "ok"; the times it ran."""
    seen: list[float] = []

    async def call() -> str:
        seen.append(time.monotonic())
        if len(seen) <= len(failures):
            raise failures[len(seen) - 1]
        return "ok"

    return seen, call


async def test_a_wait_past_the_deadline_is_given_back_at_once() -> None:
    seen, call = _calls(Busy(60.0))
    async with deadline_scope(5.0):
        with pytest.raises(Busy):
            await retry_read(call, transient=lambda e: True, attempts=3, retry_after=_asked)
    assert len(seen) == 1


async def test_a_later_wait_past_the_deadline_ends_the_retries() -> None:
    seen, call = _calls(Busy(0.05), Busy(60.0), Busy(None))
    async with deadline_scope(5.0):
        with pytest.raises(Busy) as info:
            await retry_read(call, transient=lambda e: True, attempts=3, retry_after=_asked)
    assert len(seen) == 2
    assert info.value.retry_after_s == 60.0


async def test_a_wait_within_the_deadline_is_kept_before_each_try() -> None:
    seen, call = _calls(Busy(0.3), Busy(0.3))
    async with deadline_scope(10.0):
        answer = await retry_read(call, transient=lambda e: True, attempts=3, retry_after=_asked)
    assert answer == "ok"
    assert len(seen) == 3
    assert all(later - earlier >= 0.3 for earlier, later in itertools.pairwise(seen))


async def test_without_a_hint_the_backoff_retries_as_before() -> None:
    seen, call = _calls(Busy(60.0), Busy(60.0))
    async with deadline_scope(10.0):
        answer = await retry_read(call, transient=lambda e: True, attempts=3)
    assert answer == "ok"
    assert len(seen) == 3
    assert seen[-1] - seen[0] < 5.0  # the backoff's own waits (at most 1 s each), not 60 s


# ---- against the real nodes, behind a proxy that answers 429 with a Retry-After


@pytest.fixture(params=ENGINES)
async def busy_node(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, FaultProxy]]:
    """(engine, a proxy in front of its real node); the store opens through it first."""
    loaded: Loaded = request.getfixturevalue(request.param)
    async with relay_to(loaded.url) as proxy:
        yield loaded.engine, proxy


async def _recall_while_busy(
    engine: str, proxy: FaultProxy, retry_after: str | None, timeout_ms: int
) -> tuple[A2MRemoteError, float]:
    store = {
        "backend": engine,
        "index": INDEX,
        "connection": {"hosts": [proxy.url], "retries": 2},
        "mapping": {"id": "doc_id", "content": "text"},
        "search": {"text_fields": ["text"]},
        "request_timeout_ms": timeout_ms,
    }
    gateway = Gateway(parse_config({"stores": {"s": store}}))
    try:
        client = InProcessClient(gateway.dispatcher())
        await client.call("memory/describe", {})  # opens the store through the proxy
        proxy.fault = Fault(mode="status", status=429, retry_after=retry_after)
        started = time.monotonic()
        with pytest.raises(A2MRemoteError) as info:
            await client.call("memory/recall", {"query": "cancer"})
        return info.value, time.monotonic() - started
    finally:
        await gateway.close()


async def test_an_engine_that_asks_for_more_than_the_deadline_is_asked_once(
    busy_node: tuple[str, FaultProxy],
) -> None:
    engine, proxy = busy_node
    err, _ = await _recall_while_busy(engine, proxy, "60", 10_000)
    assert err.code == -32603
    assert err.data is not None
    assert err.data["retryable"] is True
    assert proxy.counts["status_429"] == 1  # no retry can succeed before the deadline
    assert err.data["retry_after_ms"] == 60_000


async def test_an_engine_that_asks_for_a_second_waits_that_second(
    busy_node: tuple[str, FaultProxy],
) -> None:
    engine, proxy = busy_node
    err, took = await _recall_while_busy(engine, proxy, "1", 10_000)
    assert proxy.counts["status_429"] == 3  # the first try and both retries
    assert took >= 2.0  # a second before each retry
    assert err.data is not None
    assert err.data["retry_after_ms"] == 1000


async def test_without_a_retry_after_the_backoff_retries_at_once(
    busy_node: tuple[str, FaultProxy],
) -> None:
    engine, proxy = busy_node
    err, took = await _recall_while_busy(engine, proxy, None, 10_000)
    assert proxy.counts["status_429"] == 3
    assert took < 2.0  # jittered backoff, at most a few hundred ms here
    assert err.data is not None
    assert err.data["retry_after_ms"] == 1000  # the default hint
