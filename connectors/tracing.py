"""The engine-request tracing hook: connectors call it, the gateway installs it.

Connectors import neither the gateway nor OpenTelemetry. The gateway's
telemetry (``gateway.observability.telemetry``) installs an :class:`EngineTracer` when
tracing is on; with none installed, :func:`trace_transport` leaves the client
untouched and :func:`traced_client` returns the client itself, so tracing off
costs one global read per engine call.

A traced request is one span (its system, operation and index; never a body)
and the headers the tracer yields, the W3C ``traceparent``, are added to the
HTTP request the client sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class EngineTracer(Protocol):
    def request(
        self, system: str, operation: str, index: str
    ) -> AbstractContextManager[Mapping[str, str]]:
        """A span around one engine request; yields the headers to send with it."""
        ...


_tracer: EngineTracer | None = None

# Path segments kept after the first ``_endpoint`` one: fixed words, never an id.
_SUB_ENDPOINTS = frozenset({"health", "point_in_time", "scroll"})


def set_engine_tracer(tracer: EngineTracer | None) -> None:
    """Install (or, with None, remove) the tracer; clients opened later are traced."""
    global _tracer
    _tracer = tracer


def operation_of(target: str) -> str:
    """The endpoint a Lucene REST path names, without index names or ids.

    ``/idx/_search?x`` -> ``search``; ``/_search/point_in_time`` -> ``search.point_in_time``;
    ``/_cluster/health`` -> ``cluster.health``; ``/`` -> ``info``.
    """
    parts = [p for p in target.split("?", 1)[0].split("/") if p]
    for i, part in enumerate(parts):
        if part.startswith("_"):
            words = [part[1:]]
            words += [p for p in parts[i + 1 : i + 2] if p in _SUB_ENDPOINTS]
            return ".".join(words)
    return "info" if not parts else "other"


def _with_headers(headers: Any, extra: Mapping[str, str]) -> Any:
    if not extra:
        return headers
    if headers is None or not hasattr(headers, "copy"):
        return dict(extra)  # None, or elastic-transport's DEFAULT sentinel
    merged = headers.copy()  # a dict, or elastic-transport's HttpHeaders
    merged.update(extra)
    return merged


def trace_transport(transport: Any, system: str, index: str) -> None:
    """Trace every request an elastic-transport or opensearch-py transport sends.

    Both clients call ``transport.perform_request(method, path, ..., headers=...)``
    for every API call, and every client copy (``options()``, a caller's view)
    shares the transport, so wrapping it once covers all of them.
    """
    tracer = _tracer
    if tracer is None:
        return
    inner = transport.perform_request

    async def perform_request(method: str, target: str, *args: Any, **kwargs: Any) -> Any:
        with tracer.request(system, operation_of(target), index) as headers:
            kwargs["headers"] = _with_headers(kwargs.get("headers"), headers)
            return await inner(method, target, *args, **kwargs)

    transport.perform_request = perform_request


class _TracedClient:
    """A client whose coroutine methods each run in one engine span (named after the method)."""

    def __init__(self, client: Any, tracer: EngineTracer, system: str, index: str) -> None:
        self._client, self._tracer, self._system, self._index = client, tracer, system, index

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            with self._tracer.request(self._system, name, self._index):
                return await method(*args, **kwargs)

        return call


def traced_client(client: T, system: str, index: str) -> T:
    """``client`` itself when tracing is off, else a view whose calls are engine spans."""
    tracer = _tracer
    if tracer is None:
        return client
    return _TracedClient(client, tracer, system, index)  # type: ignore[return-value]
