"""The spans: one per A2M call, one per MCP tool call, one per engine request.

Imported only when tracing is on (:mod:`gateway.observability.telemetry`). Attributes follow
the OpenTelemetry semantic conventions for RPC (``rpc.system=jsonrpc``,
``rpc.method``, ``rpc.jsonrpc.error_code``) and databases (``db.system``,
``db.operation.name``, ``db.collection.name``), plus a few ``a2m.*`` ones. No
span carries a query text, a where value, a scope value, a record or a
credential: only names the operator configured and numbers. The provider is
the gateway's own, never the process-global one, so a client's built-in
instrumentation (elasticsearch-py's) stays a no-op and no request is traced twice.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.a2m.errors import ErrorCode
from gateway.a2m.methods import METHOD_CAPABILITY

TRACER_NAME = "a2m-gateway"
_W3C = TraceContextTextMapPropagator()
"""Engines get W3C trace context only: a caller's baggage is not theirs to read."""
TOOLS = frozenset({"search", "fetch", "timeline"})
_MODES = frozenset({"lexical", "dense", "hybrid"})


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def search_mode(store: Any) -> str | None:
    """The store's configured search mode (a federation has none)."""
    mode = getattr(getattr(getattr(store, "config", None), "search", None), "mode", None)
    value = getattr(mode, "value", mode)
    return value if isinstance(value, str) and value in _MODES else None


class CallSpan:
    """The span of one A2M call, current while the call runs (engine spans are its children)."""

    __slots__ = ("_span", "_token")

    def __init__(
        self,
        tracer: trace.Tracer,
        store: str,
        method: str,
        params: Any,
        mode: str | None,
    ) -> None:
        known = method if method in METHOD_CAPABILITY else "_OTHER"
        attributes: dict[str, Any] = {
            "rpc.system": "jsonrpc",
            "rpc.service": "a2m",
            "rpc.method": known,
            "rpc.jsonrpc.version": "2.0",
            "a2m.store": store,
        }
        if isinstance(params, dict):
            limit = params.get("limit")
            if isinstance(limit, int) and not isinstance(limit, bool):
                attributes["a2m.limit"] = limit
            if known == "memory/recall":
                searched = params.get("query") is not None or params.get("embedding") is not None
                recall_mode = mode if searched else "ordered"
                if recall_mode is not None:
                    attributes["a2m.mode"] = recall_mode
        self._span = tracer.start_span(known, kind=SpanKind.SERVER, attributes=attributes)
        self._token = context.attach(trace.set_span_in_context(self._span))

    def end(self, code: int, count: int | None) -> None:
        """Record the outcome (0 = ok) and close the span."""
        context.detach(self._token)
        span = self._span
        if count is not None:
            span.set_attribute("a2m.result_count", count)
        if code:
            name = _error_name(code)
            span.set_attribute("rpc.jsonrpc.error_code", code)
            span.set_attribute("error.type", name)
            span.set_status(Status(StatusCode.ERROR, name))
        span.end()


class ToolSpan:
    """What an MCP tool call records on its span."""

    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def store(self, name: str) -> None:
        self._span.set_attribute("a2m.store", name)

    def failed(self, code: int | None) -> None:
        """The tool answered isError; ``code`` is the A2M error's, when one caused it."""
        span = self._span
        name = _error_name(code) if code is not None else "tool_error"
        if code is not None:
            span.set_attribute("rpc.jsonrpc.error_code", code)
        span.set_attribute("error.type", name)
        span.set_status(Status(StatusCode.ERROR, name))


class Tracing:
    """The gateway's tracer and propagation; implements connectors.tracing.EngineTracer."""

    def __init__(self, provider: trace.TracerProvider, exporters: tuple[str, ...] = ()) -> None:
        self._provider = provider
        self.exporters = exporters
        self._tracer = provider.get_tracer(TRACER_NAME, _version())
        self._fields = tuple(propagate.get_global_textmap().fields)

    @contextmanager
    def incoming(self, *carriers: Mapping[str, Any] | None) -> Iterator[None]:
        """Run the block under the caller's trace (W3C ``traceparent``), when it sent one.

        carriers: where a trace may come from, in order of precedence; the first that
        holds a valid one wins (MCP: the message's ``_meta``, then the HTTP headers).
        """
        for carrier in carriers:
            if carrier is None:
                continue
            # Only the propagators' own fields, read once each (a Starlette lookup scans them all).
            fields = {name: v for name in self._fields if (v := carrier.get(name)) is not None}
            if not fields:
                continue
            extracted = propagate.extract(fields)
            if not trace.get_current_span(extracted).get_span_context().is_valid:
                continue  # malformed: the next carrier may hold a good one
            token = context.attach(extracted)
            try:
                yield
            finally:
                context.detach(token)
            return
        yield

    def call(self, store: Any, method: str, params: Any) -> CallSpan:
        """Start the span of one call on ``store`` (a Store or a Federation)."""
        return CallSpan(self._tracer, store.name, method, params, search_mode(store))

    @contextmanager
    def tool(self, name: str) -> Iterator[ToolSpan]:
        known = name if name in TOOLS else None
        attributes: dict[str, Any] = {
            "rpc.system": "jsonrpc",
            "rpc.method": "tools/call",
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
        }
        if known is not None:
            attributes["gen_ai.tool.name"] = known
        span_name = f"tools/call {known}" if known else "tools/call"
        with self._tracer.start_as_current_span(
            span_name,
            kind=SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield ToolSpan(span)

    @contextmanager
    def request(self, system: str, operation: str, index: str) -> Iterator[Mapping[str, str]]:
        """One engine request, a child of the current call; yields its trace headers.

        Outside a traced call (readiness probes, opening a store) nothing is recorded.
        Under an unsampled call no span is made but the trace context still travels.
        """
        parent = trace.get_current_span().get_span_context()
        if not parent.is_valid:
            yield {}
            return
        if not parent.trace_flags.sampled:
            # An unsampled call: its engine spans would not be recorded either, so none is
            # made; the engine still learns the trace (flagged not sampled). The flag, not
            # is_recording(): elasticsearch-py's no-op span wraps ours and never records.
            carrier: dict[str, str] = {}
            _W3C.inject(carrier)
            yield carrier
            return
        with self._tracer.start_as_current_span(
            f"{operation} {index}",
            kind=SpanKind.CLIENT,
            attributes={
                "db.system": system,
                "db.system.name": system,
                "db.operation.name": operation,
                "db.collection.name": index,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            carrier = {}
            _W3C.inject(carrier)
            try:
                yield carrier
            except BaseException as exc:
                # The type only: a client's message can quote a URL or an index.
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise

    def shutdown(self) -> None:
        stop = getattr(self._provider, "shutdown", None)
        if callable(stop):
            stop()


def _version() -> str | None:
    try:
        return importlib.metadata.version("a2m-gateway")
    except importlib.metadata.PackageNotFoundError:
        return None


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    """The span exporter an ``OTEL_TRACES_EXPORTER`` entry names (the SDK's entry points).

    Raises:
        ValueError: no installed package provides that exporter.
    """
    if name == "otlp":
        protocol = environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        )
        # The extra installs OTLP over HTTP (protobuf), the specification's default.
        name = "otlp_proto_grpc" if protocol.strip() == "grpc" else "otlp_proto_http"
    found = importlib.metadata.entry_points(group="opentelemetry_traces_exporter", name=name)
    for entry in found:
        return entry.load()()
    raise ValueError(f"OTEL_TRACES_EXPORTER: no installed exporter is named {name[:40]!r}")


def tracing_from_env() -> Tracing:
    """A Tracing exporting as the process's ``OTEL_*`` variables say.

    The SDK and the exporters read their own variables from ``os.environ``, so
    this reads nothing else.

    Raises:
        ValueError: an exporter named in OTEL_TRACES_EXPORTER is not installed.
    """
    environ = os.environ
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    names = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    names = [n for n in names if n and n != "none"]
    exporters = [_exporter(n, environ) for n in names]
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "a2m-gateway"}))
    provider = TracerProvider(resource=resource)  # sampler, limits: OTEL_TRACES_SAMPLER, ...
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider, tuple(names))
