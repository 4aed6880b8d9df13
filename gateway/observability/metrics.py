"""Prometheus metrics: one registry per gateway process (tests build their own)."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from connectors import retry
from gateway.resilience import BreakerState, EngineGuard
from gateway.security.ratelimit.health import BackendHealth

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._add_call_metrics()
        self._add_engine_metrics()
        self._add_http_metrics()
        self._add_federation_metrics()
        self._add_guard_metrics()
        _LIVE.add(self)
        _register_retry_hook()
        # labels() takes a lock and builds the key on every call; the label sets are few
        # (stores, methods, codes), so the children are looked up once and kept.
        self._calls: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._engine_calls: dict[tuple[str, str], Histogram] = {}
        self._statuses: dict[int, Counter] = {}

    def _add_call_metrics(self) -> None:
        """A2M calls, one series per store, method and code."""
        self.requests = Counter(
            "a2m_requests",
            "A2M calls by store, method and JSON-RPC code (0 = success)",
            ["store", "method", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "a2m_request_duration_seconds",
            "Time to answer an A2M call, engine included",
            ["store", "method"],
            buckets=_BUCKETS,
            registry=self.registry,
        )

    def _add_engine_metrics(self) -> None:
        """Engine calls: time, failures, retries."""
        self.engine_latency = Histogram(
            "a2m_engine_call_duration_seconds",
            "Time spent in engine calls",
            ["store", "operation"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.engine_errors = Counter(
            "a2m_engine_errors",
            "Engine calls that failed, by kind",
            ["store", "operation", "kind"],
            registry=self.registry,
        )
        self.retries = Counter("a2m_engine_retries", "Engine reads retried", registry=self.registry)

    def _add_http_metrics(self) -> None:
        """The HTTP transport and the process answering it."""
        self.inflight = Gauge(
            "a2m_inflight_requests", "HTTP requests being served", registry=self.registry
        )
        # With `serve --workers N` each worker has its own registry: a scrape reads one.
        self.worker = Gauge(
            "a2m_worker_pid",
            "Process id of the gateway worker that answered",
            registry=self.registry,
        )
        self.worker.set(os.getpid())
        self.http_responses = Counter(
            "a2m_http_responses",
            "HTTP responses by status",
            ["status"],
            registry=self.registry,
        )

    def _add_federation_metrics(self) -> None:
        """Members a federated call answered without."""
        self.left_out = Counter(
            "a2m_federation_left_out",
            "Federated calls answered without a member, by reason",
            ["federation", "member", "reason"],
            registry=self.registry,
        )

    def _add_guard_metrics(self) -> None:
        """What the breaker and the load shedder did."""
        self.breaker_transitions = Counter(
            "a2m_engine_breaker_transitions",
            "Circuit breaker state changes, by store",
            ["store", "from", "to"],
            registry=self.registry,
        )
        self.shed_calls = Counter(
            "a2m_engine_shed_calls",
            "Engine calls refused without calling the engine (circuit_open, overloaded)",
            ["store", "reason"],
            registry=self.registry,
        )

    def observe_call(self, store: str, method: str, code: int, seconds: float) -> None:
        key = (store, method, code)
        children = self._calls.get(key)
        if children is None:
            children = self._calls[key] = (
                self.requests.labels(store, method, str(code)),
                self.latency.labels(store, method),
            )
        children[0].inc()
        children[1].observe(seconds)

    def observe_engine(self, store: str, operation: str, seconds: float, error: str | None) -> None:
        child = self._engine_calls.get((store, operation))
        if child is None:
            child = self._engine_calls[(store, operation)] = self.engine_latency.labels(
                store, operation
            )
        child.observe(seconds)
        if error is not None:
            self.engine_errors.labels(store, operation, error).inc()

    def observe_http(self, status: int) -> None:
        child = self._statuses.get(status)
        if child is None:
            child = self._statuses[status] = self.http_responses.labels(str(status))
        child.inc()

    def observe_left_out(self, federation: str, member: str, reason: str) -> None:
        self.left_out.labels(federation, member, reason).inc()

    def watch_guards(self, guards: Mapping[str, EngineGuard]) -> None:
        """Report each store's breaker and in-flight calls (read when scraped: no hot-path cost)."""
        self.registry.register(_GuardCollector(dict(guards)))
        for guard in guards.values():
            guard.observe(self)

    def watch_quota(self, health: BackendHealth) -> None:
        """Report the shared rate limit's Redis: up or not, failures, calls decided without it."""
        self.registry.register(_QuotaCollector(health))

    def breaker_transition(self, store: str, before: BreakerState, after: BreakerState) -> None:
        self.breaker_transitions.labels(store, before.label, after.label).inc()

    def shed(self, store: str, reason: str) -> None:
        self.shed_calls.labels(store, reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _GuardCollector(Collector):
    def __init__(self, guards: dict[str, EngineGuard]) -> None:
        self._guards = guards

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = GaugeMetricFamily(
            "a2m_engine_breaker_state",
            "Circuit breaker per store: 0 closed, 1 half-open, 2 open",
            labels=["store"],
        )
        inflight = GaugeMetricFamily(
            "a2m_engine_inflight_calls", "Engine calls in flight, by store", labels=["store"]
        )
        for name, guard in self._guards.items():
            state.add_metric([name], float(guard.state))
            inflight.add_metric([name], float(guard.inflight))
        yield state
        yield inflight


class _QuotaCollector(Collector):
    """Read when scraped from the shared quota's own counts: no cost per call."""

    def __init__(self, health: BackendHealth) -> None:
        self._health = health

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        health = self._health
        up = GaugeMetricFamily(
            "a2m_ratelimit_backend_up",
            "1 while the shared rate limit's Redis answers, 0 while calls are decided without it",
        )
        up.add_metric([], 0.0 if health.down else 1.0)
        errors = CounterMetricFamily(
            "a2m_ratelimit_backend_errors",
            "Redis calls of the shared rate limit that failed or were late, by kind",
            labels=["kind"],
        )
        for kind, n in sorted(health.errors.items()):
            errors.add_metric([kind], float(n))
        without = CounterMetricFamily(
            "a2m_ratelimit_backend_fallback_calls",
            "Calls decided without Redis, by server.rate_limit.redis.on_error",
            labels=["on_error"],
        )
        for mode, n in sorted(health.decided_without.items()):
            without.add_metric([mode], float(n))
        yield up
        yield errors
        yield without


# connectors.retry keeps its hooks for the process: one hook, registered once, counts each
# retry on every live Metrics (a Metrics dropped by a test leaves nothing behind).
_LIVE: weakref.WeakSet[Metrics] = weakref.WeakSet()
_hooked = False


def _count_retry() -> None:
    for m in list(_LIVE):
        m.retries.inc()


def _register_retry_hook() -> None:
    global _hooked
    if not _hooked:
        retry.on_retry(_count_retry)
        _hooked = True
