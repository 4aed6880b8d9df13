"""OpenTelemetry traces of A2M calls over HTTP, on the real engines (docs/operations.md).

Each backend serves the packaged demo corpus: the Elasticsearch and OpenSearch
nodes (the conformance suite's index) and the embedded Qdrant (qdrant-edge). A
recall sent with a W3C ``traceparent`` must give one call span under that
parent and one child span per engine request, and the engine must receive a
``traceparent`` of the same trace.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gateway.a2m.errors import ErrorCode
from gateway.config import AuthConfig, parse_config
from gateway.demo import DEMO_STORE, default_demo_config
from gateway.observability import telemetry
from gateway.runtime import Gateway
from gateway.security.auth import hash_api_key
from tests.support.asgi import app_client, http_app
from tests.support.demo_loader import demo_store, load_demo_index
from tests.support.recording_proxy import Recorded, recording_proxy
from tests.support.spans import (
    PARENT_ID,
    TRACE_ID,
    TRACEPARENT,
    children,
    every_string,
    hex_parent,
    hex_span,
    hex_trace,
    named,
    tracing_into_memory,
)

LUCENE = [
    pytest.param("elasticsearch", marks=[pytest.mark.elasticsearch, pytest.mark.integration]),
    pytest.param("opensearch", marks=[pytest.mark.opensearch, pytest.mark.integration]),
]
BACKENDS = [*LUCENE, pytest.param("qdrant", marks=pytest.mark.integration)]
CALLER_KEY = "a2m_otel-caller-key-0123456789-abcdefghijklmnopqrs"
ENGINE_KEY = "engine-api-key-otel-7f3a9c1e5b"
OTHER_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
UNSAMPLED = f"00-{OTHER_TRACE_ID}-b7ad6b7169203331-00"
SECRET_QUERY = "zebra-7731 password=hunter2 memory recall"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with tracing_into_memory() as exporter:
        yield exporter


def _store(engine: str, request: pytest.FixtureRequest, url: str | None = None) -> dict[str, Any]:
    base: str = request.getfixturevalue(f"{engine}_url")
    index = load_demo_index(engine, base).index  # type: ignore[arg-type]
    return demo_store(engine, url or base, index)  # type: ignore[arg-type]


@asynccontextmanager
async def _served(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway's HTTP app in this process, its stores open."""
    app = http_app(gateway)
    await gateway.open_local_stores()
    await gateway.start(strict=True)
    try:
        async with app_client(app, timeout=60) as client:
            yield client
    finally:
        await gateway.close()


def _gateway(
    engine: str,
    request: pytest.FixtureRequest,
    *,
    url: str | None = None,
    auth: dict[str, Any] | None = None,
) -> Gateway:
    if engine == "qdrant":
        cfg = default_demo_config(hybrid=False)
        if auth is not None:
            server = cfg.server.model_copy(update={"auth": AuthConfig.model_validate(auth)})
            cfg = cfg.model_copy(update={"server": server})
        return Gateway(cfg)
    store = _store(engine, request, url)
    section = {"auth": auth} if auth is not None else {}
    return Gateway(parse_config({"server": section, "stores": {DEMO_STORE: store}}))


async def _post(
    client: httpx.AsyncClient, body: Any, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    r = await client.post(
        f"/a2m/{DEMO_STORE}",
        content=json.dumps(body),
        headers={"content-type": "application/json", **(headers or {})},
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def _recall(params: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "memory/recall", "params": params}


@pytest.mark.parametrize("engine", BACKENDS)
async def test_a_recall_is_a_call_span_under_the_callers_trace_with_engine_children(
    engine: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter
) -> None:
    gateway = _gateway(engine, request)
    index = gateway.config.stores[DEMO_STORE].index
    async with _served(gateway) as client:
        spans.clear()  # opening the store is not part of the call
        answer = await _post(
            client, _recall({"query": "memory recall", "limit": 3}), {"traceparent": TRACEPARENT}
        )
    records = answer["result"]["records"]
    assert records, answer
    finished = spans.get_finished_spans()
    [call] = named(finished, "memory/recall")
    assert call.kind is SpanKind.SERVER
    assert hex_trace(call) == TRACE_ID
    assert hex_parent(call) == PARENT_ID
    assert call.attributes is not None
    assert call.attributes["rpc.system"] == "jsonrpc"
    assert call.attributes["rpc.method"] == "memory/recall"
    assert call.attributes["a2m.store"] == DEMO_STORE
    assert call.attributes["a2m.limit"] == 3
    assert call.attributes["a2m.mode"] == "lexical"
    assert call.attributes["a2m.result_count"] == len(records)
    assert "rpc.jsonrpc.error_code" not in call.attributes
    assert call.status.status_code is StatusCode.UNSET

    engine_spans = children(finished, call)
    assert engine_spans, [s.name for s in finished]
    for child in engine_spans:
        assert child.kind is SpanKind.CLIENT
        assert hex_trace(child) == TRACE_ID
        assert child.attributes is not None
        assert child.attributes["db.system"] == engine
        assert child.attributes["db.collection.name"] == index
    operations = {c.attributes["db.operation.name"] for c in engine_spans if c.attributes}
    assert operations == ({"query_points"} if engine == "qdrant" else {"search"})
    # Every span this call made is the call's or its children's: nothing else was traced.
    assert {hex_span(s) for s in finished} == {hex_span(call)} | {hex_span(c) for c in engine_spans}


@pytest.mark.parametrize("engine", BACKENDS)
async def test_without_a_traceparent_the_call_span_starts_a_trace(
    engine: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter
) -> None:
    async with _served(_gateway(engine, request)) as client:
        spans.clear()
        answer = await _post(client, _recall({"limit": 2}))
    assert len(answer["result"]["records"]) == 2
    finished = spans.get_finished_spans()
    [call] = named(finished, "memory/recall")
    assert call.parent is None
    assert hex_trace(call) != TRACE_ID
    assert call.attributes is not None
    assert call.attributes["a2m.mode"] == "ordered"
    assert children(finished, call)  # the ordered read's engine requests


@pytest.mark.parametrize("engine", LUCENE)
async def test_the_engine_receives_the_call_spans_trace_in_its_traceparent(
    engine: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter
) -> None:
    base: str = request.getfixturevalue(f"{engine}_url")
    with recording_proxy(base) as (proxy_url, seen):
        async with _served(_gateway(engine, request, url=proxy_url)) as client:
            opened = len(seen)
            spans.clear()
            await _post(
                client, _recall({"query": "memory", "limit": 3}), {"traceparent": TRACEPARENT}
            )
            await _post(client, _recall({"query": "memory", "limit": 3}))
            # A caller's unsampled trace: nothing recorded, the context still travels.
            await _post(client, _recall({"query": "memory"}), {"traceparent": UNSAMPLED})
    searches = [r for r in seen[opened:] if "/_search" in r.path]
    assert len(searches) == 3, seen[opened:]
    unsampled = searches.pop()
    assert unsampled.traceparent is not None
    assert unsampled.traceparent.startswith(f"00-{OTHER_TRACE_ID}-")
    assert unsampled.traceparent.endswith("-00")
    finished = spans.get_finished_spans()
    assert not any(hex_trace(s) == OTHER_TRACE_ID for s in finished)
    calls = named(finished, "memory/recall")
    assert len(calls) == 2
    for recorded, call in zip(searches, calls, strict=True):
        assert recorded.traceparent is not None, recorded
        version, trace_id, parent_id, flags = recorded.traceparent.split("-")
        assert version == "00"
        assert int(flags, 16) & 1  # sampled
        assert trace_id == hex_trace(call)
        [engine_span] = children(finished, call)
        assert parent_id == hex_span(engine_span)  # the engine request's own span
    assert hex_trace(calls[0]) == TRACE_ID
    assert hex_trace(calls[1]) != TRACE_ID
    # Opening the store sent no trace: no call was running.
    assert all(r.traceparent is None for r in seen[:opened])


@pytest.mark.parametrize("engine", BACKENDS)
async def test_an_error_answer_puts_its_canonical_code_on_the_span(
    engine: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter
) -> None:
    async with _served(_gateway(engine, request)) as client:
        spans.clear()
        bad = await _post(client, _recall({"query": "memory", "limit": -1}))
        unknown = await _post(client, {"jsonrpc": "2.0", "id": 2, "method": "memory/zebra-x"})
        write = await _post(client, {"jsonrpc": "2.0", "id": 3, "method": "memory/forget"})
    assert bad["error"]["code"] == ErrorCode.INVALID_PARAMS
    assert unknown["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    assert write["error"]["code"] == ErrorCode.READ_ONLY
    finished = spans.get_finished_spans()
    by_code = {}
    for span in finished:
        assert span.attributes is not None
        assert span.status.status_code is StatusCode.ERROR
        by_code[span.attributes["rpc.jsonrpc.error_code"]] = span
    assert set(by_code) == {
        int(ErrorCode.INVALID_PARAMS),
        int(ErrorCode.METHOD_NOT_FOUND),
        int(ErrorCode.READ_ONLY),
    }
    assert by_code[int(ErrorCode.READ_ONLY)].name == "memory/forget"
    invalid = by_code[int(ErrorCode.INVALID_PARAMS)]
    assert invalid.name == "memory/recall"
    assert invalid.status.description == "INVALID_PARAMS"
    assert invalid.attributes is not None
    assert invalid.attributes["error.type"] == "INVALID_PARAMS"
    # A method name the caller made up is not a span name.
    assert by_code[int(ErrorCode.METHOD_NOT_FOUND)].name == "_OTHER"
    assert not any("zebra" in t for t in every_string(finished))


@pytest.mark.parametrize("engine", BACKENDS)
async def test_no_span_holds_the_query_or_a_credential(
    engine: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter
) -> None:
    auth = {"api_keys": [{"subject": "otel-bob", "hash": hash_api_key(CALLER_KEY)}]}
    headers = {"traceparent": TRACEPARENT, "authorization": f"Bearer {CALLER_KEY}"}
    params = {"query": SECRET_QUERY, "limit": 5, "where": {"group": "zebra-7731"}}
    seen: list[Recorded] = []
    if engine == "qdrant":
        async with _served(_gateway(engine, request, auth=auth)) as client:
            spans.clear()
            answer = await _post(client, _recall(params), headers)
    else:
        base: str = request.getfixturevalue(f"{engine}_url")
        with recording_proxy(base) as (proxy_url, seen):
            store = _store(engine, request, proxy_url)
            # The test nodes run without security: the proxy keeps the key from them.
            store["connection"]["api_key"] = ENGINE_KEY
            gateway = Gateway(
                parse_config({"server": {"auth": auth}, "stores": {DEMO_STORE: store}})
            )
            async with _served(gateway) as client:
                spans.clear()
                answer = await _post(client, _recall(params), headers)
    assert "result" in answer, answer
    if engine != "qdrant":
        # The control: the key did travel, on the engine request the span describes.
        assert any(r.authorization and r.authorization.startswith("ApiKey") for r in seen)
    finished = spans.get_finished_spans()
    assert named(finished, "memory/recall")
    texts = every_string(finished)
    encoded = base64.b64encode(ENGINE_KEY.encode()).decode()
    for secret in ("zebra", "hunter2", CALLER_KEY, ENGINE_KEY, encoded, "otel-bob"):
        assert not any(secret in t for t in texts), (secret, texts)


def test_engines_get_the_trace_context_but_never_the_callers_baggage(
    spans: InMemorySpanExporter,
) -> None:
    tracing = telemetry.active()
    assert tracing is not None

    class Store:
        name = "s"

    headers = {"traceparent": TRACEPARENT, "baggage": "user=zebra-7731"}
    with tracing.incoming(headers):
        call = tracing.call(Store(), "memory/recall", {"query": "q"})
        with tracing.request("opensearch", "search", "idx") as sent:
            sent = dict(sent)
        call.end(0, 0)
    assert sent["traceparent"].split("-")[1] == TRACE_ID
    assert "baggage" not in sent
    [engine, _] = spans.get_finished_spans()
    assert sent["traceparent"].split("-")[2] == hex_span(engine)
    # Outside a call nothing is traced and no header is sent.
    with tracing.request("opensearch", "search", "idx") as outside:
        assert dict(outside) == {}
    assert len(spans.get_finished_spans()) == 2
