"""Tracing into memory for a test: the gateway's own Tracing over an InMemorySpanExporter.

Installed for one test and removed after it; engine clients opened inside the
test are traced (the hook is read when a connector opens).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.observability import telemetry
from gateway.observability.tracing import Tracing

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
"""An incoming W3C trace context (the specification's example), sampled."""


@contextmanager
def tracing_into_memory() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(Tracing(provider, ("memory",)))
    try:
        yield exporter
    finally:
        telemetry.install(None)
        provider.shutdown()


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def hex_span(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


def hex_parent(span: ReadableSpan) -> str | None:
    return f"{span.parent.span_id:016x}" if span.parent is not None else None


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if hex_parent(s) == hex_span(parent)]


def every_string(spans: Sequence[ReadableSpan]) -> list[str]:
    """Every text a span exports: names, attribute values, status and event texts."""
    out: list[str] = []
    for span in spans:
        out.append(span.name)
        values = list((span.attributes or {}).values())
        for event in span.events:
            out.append(event.name)
            values += list((event.attributes or {}).values())
        for value in values:
            out += [str(v) for v in value] if isinstance(value, tuple) else [str(value)]
        if span.status.description:
            out.append(span.status.description)
    return out
