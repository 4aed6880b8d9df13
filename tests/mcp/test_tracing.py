"""An MCP tool call over Streamable HTTP is one span, parent of its A2M call spans.

The embedded demo (qdrant-edge) behind the gateway's ASGI app in this
process, driven by the official SDK client; spans go to an in-memory exporter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gateway.a2m.errors import ErrorCode
from gateway.demo import default_demo_config
from gateway.observability.metrics import Metrics
from gateway.runtime import Gateway
from gateway.transports.http import create_app
from tests.support.spans import (
    PARENT_ID,
    TRACE_ID,
    TRACEPARENT,
    children,
    every_string,
    hex_parent,
    hex_trace,
    named,
    tracing_into_memory,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with tracing_into_memory() as exporter:
        yield exporter


@asynccontextmanager
async def _mcp_client(headers: dict[str, str]) -> AsyncIterator[Client]:
    gateway = Gateway(default_demo_config(hybrid=False))
    app = create_app(gateway, gateway.config.server, Metrics())
    await gateway.open_local_stores()
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://localhost",
            headers=headers,
            timeout=60,
        ) as http,
    ):
        transport = streamable_http_client("http://localhost/mcp", http_client=http)
        async with Client(transport, mode="2026-07-28", read_timeout_seconds=60) as client:
            yield client


async def test_a_tool_call_is_a_span_under_the_callers_trace(
    spans: InMemorySpanExporter,
) -> None:
    async with _mcp_client({"traceparent": TRACEPARENT}) as client:
        spans.clear()
        result = await client.call_tool("search", {"query": "memory recall", "limit": 2})
    assert not result.is_error, result
    finished = spans.get_finished_spans()
    [tool] = named(finished, "tools/call search")
    assert tool.kind is SpanKind.SERVER
    assert hex_trace(tool) == TRACE_ID
    assert hex_parent(tool) == PARENT_ID
    assert tool.attributes is not None
    assert tool.attributes["mcp.method.name"] == "tools/call"
    assert tool.attributes["gen_ai.tool.name"] == "search"
    assert tool.attributes["a2m.store"] == "demo"
    assert tool.status.status_code is StatusCode.UNSET
    [call] = children(finished, tool)
    assert call.name == "memory/recall"
    assert call.attributes is not None
    assert call.attributes["a2m.limit"] == 2
    assert children(finished, call)  # the engine request
    assert not any("memory recall" in t for t in every_string(finished))


async def test_a_refused_tool_call_records_why_on_its_span(spans: InMemorySpanExporter) -> None:
    async with _mcp_client({}) as client:
        spans.clear()
        invalid = await client.call_tool("search", {"query": "memory", "limit": 0})
        # Past the store's max_query_length: the schema's maxLength, refused by the A2M call.
        refused = await client.call_tool("search", {"query": "memory " * 1000})
        unknown = await client.call_tool("zebra-tool", {})
    assert invalid.is_error
    assert refused.is_error
    assert unknown.is_error
    finished = spans.get_finished_spans()
    tools = [s for s in finished if s.name.startswith("tools/call")]
    assert [s.name for s in tools] == ["tools/call search", "tools/call search", "tools/call"]
    for span in tools:
        assert span.status.status_code is StatusCode.ERROR
    codes = [(s.attributes or {}).get("rpc.jsonrpc.error_code") for s in tools]
    assert codes[0] == ErrorCode.INVALID_PARAMS  # the tool's own argument check (limit >= 1)
    assert codes[1] == ErrorCode.INVALID_PARAMS  # the A2M call's refusal
    assert codes[2] is None
    assert (tools[2].attributes or {})["error.type"] == "tool_error"
    [call] = children(finished, tools[1])
    assert (call.attributes or {})["rpc.jsonrpc.error_code"] == ErrorCode.INVALID_PARAMS
    assert not any("zebra" in t for t in every_string(finished))


async def test_a_traceparent_in_the_messages_meta_wins_over_the_http_header(
    spans: InMemorySpanExporter,
) -> None:
    other_trace, other_parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    meta: Any = {"traceparent": f"00-{other_trace}-{other_parent}-01"}
    async with _mcp_client({"traceparent": TRACEPARENT}) as client:
        spans.clear()
        result = await client.call_tool("search", {"query": "memory"}, meta=meta)
    assert not result.is_error, result
    [tool] = named(spans.get_finished_spans(), "tools/call search")
    assert hex_trace(tool) == other_trace
    assert hex_parent(tool) == other_parent
