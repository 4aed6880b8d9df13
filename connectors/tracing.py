"""The engine-request tracing hook: connectors call it, the gateway installs it.

Connectors import neither the gateway nor OpenTelemetry. The gateway's
telemetry (``gateway.observability.telemetry``) installs an :class:`EngineTracer` when
tracing is on. A connector asks :func:`engine_tracer` at its own seam, around each
engine request it sends (the Lucene connectors in ``LuceneClient.call``), and wraps a
client whose calls are requests in :func:`traced_client`; with none installed that is
the client itself, so tracing off costs one global read per engine call. No client
library's object is changed.

A traced request is one span (its system, operation and index; never a body)
and the headers the tracer yields, the W3C ``traceparent``, are added to the
HTTP request the client sends (:func:`with_headers`).
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


def engine_tracer() -> EngineTracer | None:
    """The installed tracer, or None when tracing is off."""
    return _tracer


def with_headers(headers: Mapping[str, str] | None, extra: Mapping[str, str]) -> Any:
    """``headers`` with ``extra`` added (a new mapping; ``headers`` is left as it is)."""
    if not extra:
        return headers
    if headers is None:
        return dict(extra)
    return {**headers, **extra}


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
