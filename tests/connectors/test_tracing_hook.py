"""The connectors' tracing hook without an engine: operation names, headers, no-op when off.

The Lucene connectors' requests are traced at their own seam, ``LuceneClient.call``;
tests/gateway/test_tracing.py follows them to real engines."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from elastic_transport import HttpHeaders

from connectors.lucene.client import LuceneClient
from connectors.lucene.elasticsearch import ElasticsearchDialect
from connectors.lucene.spec import LuceneConnectionSpec
from connectors.spec import ConnectorSpec
from connectors.tracing import (
    engine_tracer,
    operation_of,
    set_engine_tracer,
    traced_client,
    with_headers,
)


@pytest.mark.parametrize(
    ("target", "operation"),
    [
        ("/idx/_search", "search"),
        ("/idx/_search?typed_keys=true", "search"),
        ("/_search", "search"),
        ("/a,b/_msearch", "msearch"),
        ("/idx/_pit?keep_alive=1m", "pit"),
        ("/_pit", "pit"),
        ("/idx/_search/point_in_time", "search.point_in_time"),
        ("/_search/scroll", "search.scroll"),
        ("/idx/_mapping", "mapping"),
        ("/_cluster/health", "cluster.health"),
        ("/_nodes/_local/_none", "nodes"),
        ("/idx/_doc/secret-id-42", "doc"),  # never an id
        ("/", "info"),
        ("/idx", "other"),
    ],
)
def test_the_operation_is_the_endpoint_never_an_index_or_id(target: str, operation: str) -> None:
    assert operation_of(target) == operation


class _Recorder:
    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str]] = []

    @contextmanager
    def request(self, system: str, operation: str, index: str) -> Iterator[Mapping[str, str]]:
        self.spans.append((system, operation, index))
        yield {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}


class _Dialect(ElasticsearchDialect):
    """The Elasticsearch dialect whose requests are recorded instead of sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str, Any]] = []

    async def request(self, client: Any, method: str, path: str, **kwargs: Any) -> Any:
        self.sent.append((method, path, kwargs.get("headers")))
        return {"answer": True}


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    tracer = _Recorder()
    set_engine_tracer(tracer)
    try:
        yield tracer
    finally:
        set_engine_tracer(None)


async def test_off_requests_and_clients_are_left_as_they_are() -> None:
    assert engine_tracer() is None
    dialect = _Dialect()
    client = LuceneClient(ConnectorSpec("elasticsearch", "idx", LuceneConnectionSpec()), dialect)
    await client.call("POST", "/idx/_search", 1.0)
    [(_, _, sent)] = dialect.sent
    assert sent is None  # no header added, not even an empty mapping
    assert with_headers({"authorization": "ApiKey k"}, {}) == {"authorization": "ApiKey k"}
    plain = object()
    assert traced_client(plain, "qdrant", "c") is plain


@pytest.mark.parametrize(
    "headers",
    [None, {"authorization": "ApiKey k"}, HttpHeaders({"authorization": "ApiKey k"})],
    ids=["none", "dict", "elastic-transport"],
)
def test_trace_headers_are_added_and_the_others_kept(headers: Any) -> None:
    trace = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    sent = with_headers(headers, trace)
    assert sent["traceparent"].startswith("00-1111")
    if headers is not None:
        assert sent["authorization"] == "ApiKey k"
        assert "traceparent" not in headers  # the caller's mapping is not modified


async def test_a_traced_request_is_one_span_with_the_trace_headers_and_the_callers(
    recorder: _Recorder,
) -> None:
    dialect = _Dialect()
    client = LuceneClient(ConnectorSpec("elasticsearch", "idx", LuceneConnectionSpec()), dialect)
    client._client = object()  # opened: for_caller needs a client, and sends nothing itself
    caller = client.for_caller("ApiKey k")
    assert await caller.call("POST", "/idx/_search", 1.0) == {"answer": True}
    [(method, target, sent)] = dialect.sent
    assert (method, target) == ("POST", "/idx/_search")
    assert sent["traceparent"].startswith("00-1111")
    assert sent["authorization"] == "ApiKey k"
    assert recorder.spans == [("elasticsearch", "search", "idx")]


async def test_a_traced_client_names_each_call_after_its_method(recorder: _Recorder) -> None:
    class Client:
        async def query_points(self, name: str) -> str:
            return f"points of {name}"

    traced = traced_client(Client(), "qdrant", "coll")
    assert await traced.query_points("coll") == "points of coll"
    assert recorder.spans == [("qdrant", "query_points", "coll")]
