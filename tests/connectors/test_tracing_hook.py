"""The connectors' tracing hook without an engine: operation names, headers, no-op when off."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from elastic_transport import HttpHeaders

from connectors.tracing import operation_of, set_engine_tracer, trace_transport, traced_client


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


class _Transport:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    async def perform_request(self, method: str, target: str, **kwargs: Any) -> str:
        self.sent.append((method, target, kwargs.get("headers")))
        return "answer"


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    tracer = _Recorder()
    set_engine_tracer(tracer)
    try:
        yield tracer
    finally:
        set_engine_tracer(None)


def test_off_the_transport_and_client_are_left_as_they_are() -> None:
    transport = _Transport()
    before = transport.perform_request
    trace_transport(transport, "opensearch", "idx")
    assert transport.perform_request == before
    assert "perform_request" not in vars(transport)
    client = object()
    assert traced_client(client, "qdrant", "c") is client


@pytest.mark.parametrize(
    "headers",
    [None, {"authorization": "ApiKey k"}, HttpHeaders({"authorization": "ApiKey k"})],
    ids=["none", "dict", "elastic-transport"],
)
async def test_a_traced_transport_adds_the_trace_headers_and_keeps_the_others(
    recorder: _Recorder, headers: Any
) -> None:
    transport = _Transport()
    trace_transport(transport, "elasticsearch", "idx")
    assert await transport.perform_request("POST", "/idx/_search", headers=headers) == "answer"
    [(method, target, sent)] = transport.sent
    assert (method, target) == ("POST", "/idx/_search")
    assert sent["traceparent"].startswith("00-1111")
    if headers is not None:
        assert sent["authorization"] == "ApiKey k"
        assert "traceparent" not in headers  # the caller's mapping is not modified
    assert recorder.spans == [("elasticsearch", "search", "idx")]


async def test_a_traced_client_names_each_call_after_its_method(recorder: _Recorder) -> None:
    class Client:
        async def query_points(self, name: str) -> str:
            return f"points of {name}"

    traced = traced_client(Client(), "qdrant", "coll")
    assert await traced.query_points("coll") == "points of coll"
    assert recorder.spans == [("qdrant", "query_points", "coll")]
