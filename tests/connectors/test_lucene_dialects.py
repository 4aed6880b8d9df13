"""Both Lucene dialects over the one connector, through each official client with a
canned engine in place of its HTTP layer (elastic-transport node, opensearch-py
connection): what goes on the wire and what comes back. No engine needed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson
import pytest

from connectors.base import SearchRequest
from connectors.errors import EngineConfigError
from connectors.fusion import inner_product_score
from connectors.lucene.connector import LuceneConnector
from connectors.lucene.dialect import Dialect
from connectors.lucene.elasticsearch import ElasticsearchDialect
from connectors.lucene.opensearch import OpenSearchDialect
from connectors.spec import ConnectorSpec
from tests.connectors.specs import spec_of

VECTOR_MAPPING = {
    "elasticsearch": {"type": "dense_vector", "dims": 2, "similarity": "max_inner_product"},
    "opensearch": {"type": "knn_vector", "dimension": 2, "space_type": "innerproduct"},
}
VERSION = {"elasticsearch": "9.1.0", "opensearch": "3.5.0"}


@dataclass
class Sent:
    method: str
    path: str
    params: dict[str, str]
    body: bytes | None
    headers: dict[str, str]

    def json(self) -> Any:
        assert self.body is not None
        return orjson.loads(self.body)


@dataclass
class CannedEngine:
    """Answers like an engine holding one index ``idx`` with two documents."""

    engine: str
    sent: list[Sent] = field(default_factory=list)
    missing_index: bool = False

    def answer(self, method: str, target: str, body: bytes | None, headers: Any) -> Any:
        url = urlsplit(target)
        sent = Sent(method, url.path, dict(parse_qsl(url.query)), body, dict(headers or {}))
        self.sent.append(sent)
        if url.path == "/idx/_mapping":
            if self.missing_index:
                return 404, {"error": {"type": "index_not_found_exception"}, "status": 404}
            properties = {"text": {"type": "text"}, "v": VECTOR_MAPPING[self.engine]}
            return 200, {"idx": {"mappings": {"properties": properties}}}
        if url.path in ("/", "/_nodes/_local/_none"):
            if self.engine == "opensearch":
                return 200, {"version": {"number": VERSION["opensearch"]}}
            return 200, {"nodes": {"n1": {"version": VERSION["elasticsearch"]}}}
        if url.path == "/idx/_search":
            return 200, self.hits()
        if url.path == "/idx/_msearch":
            return 200, {"responses": [self.hits(), self.hits()]}
        return 200, {}

    @staticmethod
    def hits() -> dict[str, Any]:
        docs = [("a", 3.0, "first"), ("b", 1.5, "second")]
        rows = [
            {"_index": "idx", "_id": i, "_score": s, "_source": {"text": t}} for i, s, t in docs
        ]
        return {"hits": {"hits": rows}}


def es_node(engine: CannedEngine) -> type:
    from elastic_transport import ApiResponseMeta, BaseAsyncNode, HttpHeaders
    from elastic_transport._node import NodeApiResponse

    class Node(BaseAsyncNode):
        async def perform_request(  # type: ignore[override]
            self, method: str, target: str, body: bytes | None = None, headers: Any = None, **_: Any
        ) -> NodeApiResponse:
            status, payload = engine.answer(method, target, body, headers)
            meta = ApiResponseMeta(
                status=status,
                http_version="1.1",
                headers=HttpHeaders(
                    {"content-type": "application/json", "x-elastic-product": "Elasticsearch"}
                ),
                duration=0.0,
                node=self.config,
            )
            return NodeApiResponse(meta, orjson.dumps(payload))

        async def close(self) -> None:  # type: ignore[override]
            return None

    return Node


def os_connection(engine: CannedEngine) -> type:
    from opensearchpy import AsyncConnection

    class Connection(AsyncConnection):
        async def perform_request(
            self,
            method: str,
            url: str,
            params: Any = None,
            body: bytes | None = None,
            timeout: Any = None,  # noqa: ASYNC109 - the library's signature
            ignore: Any = (),
            headers: Any = None,
        ) -> Any:
            query = "&".join(f"{k}={v}" for k, v in (params or {}).items())
            merged = {**self.headers, **(headers or {})}
            status, payload = engine.answer(method, f"{url}?{query}", body, merged)
            raw = orjson.dumps(payload).decode()
            if status >= 300:
                self._raise_error(status, raw, "application/json")
            return status, {"content-type": "application/json"}, raw

        async def close(self) -> None:
            return None

    return Connection


def connector(engine: CannedEngine, **connection: Any) -> LuceneConnector:
    spec: ConnectorSpec[Any] = spec_of(
        {
            "backend": engine.engine,
            "index": "idx",
            "connection": {"hosts": ["http://127.0.0.1:9200"], **connection},
            "mapping": {"content": "text"},
            "search": {
                "mode": "hybrid",
                "text_fields": ["text"],
                "vector_field": "v",
                "embedder": {"kind": "local", "model": "m"},
            },
        }
    )
    dialect: Dialect
    if engine.engine == "elasticsearch":
        dialect = ElasticsearchDialect(node_class=es_node(engine))
    else:
        dialect = OpenSearchDialect(connection_class=os_connection(engine))
    return LuceneConnector(spec, dialect)


ENGINES = ["elasticsearch", "opensearch"]
KNN_OF: dict[str, Callable[[Any], dict[str, Any]]] = {
    "elasticsearch": lambda body: dict(body["knn"]),
    "opensearch": lambda body: dict(body["query"]["knn"]["v"]),
}


@pytest.mark.parametrize("name", ENGINES)
async def test_open_reads_the_mapping_and_the_version(name: str) -> None:
    engine = CannedEngine(name)
    conn = connector(engine)
    info = await conn.open()
    try:
        assert info.engine == f"{name} {VERSION[name]}"
        assert info.vectors is not None
        assert (info.vectors.dimensions, info.vectors.metric) == (2, "dot")
        assert next(s.path for s in engine.sent) == "/idx/_mapping"
    finally:
        await conn.close()


@pytest.mark.parametrize("name", ENGINES)
async def test_a_missing_index_is_a_config_error_through_the_clients_error_class(
    name: str,
) -> None:
    conn = connector(CannedEngine(name, missing_index=True))
    with pytest.raises(EngineConfigError, match="index: the index does not exist"):
        await conn.open()


@pytest.mark.parametrize("name", ENGINES)
async def test_lexical_knn_and_hybrid_on_the_wire(name: str) -> None:
    engine = CannedEngine(name)
    conn = connector(engine)
    await conn.open()
    try:
        engine.sent.clear()
        lexical = await conn.search(SearchRequest(limit=2, text="x"))
        assert [h.score for h in lexical] == [1.0, 0.5]  # normalised by the best
        knn = await conn.search(SearchRequest(limit=2, dense=[0.5, 0.5], candidates=7))
        # Unbounded inner products are mapped into [0, 1] the same way on both.
        assert [h.score for h in knn] == [inner_product_score(3.0), inner_product_score(1.5)]
        hybrid = await conn.search(SearchRequest(limit=2, text="x", dense=[0.5, 0.5], candidates=4))
        assert [h.id for h in hybrid] == ["a", "b"]
        paths = [(s.method, s.path) for s in engine.sent]
        assert paths == [("POST", "/idx/_search")] * 2 + [("POST", "/idx/_msearch")]
        clause = KNN_OF[name](engine.sent[1].json())
        assert clause["k"] == 7
        assert clause[{"elasticsearch": "query_vector", "opensearch": "vector"}[name]] == [0.5, 0.5]
        msearch = engine.sent[2]
        assert "x-ndjson" in msearch.headers["content-type"]
        assert msearch.body is not None
        lines = [orjson.loads(line) for line in msearch.body.splitlines()]
        assert [lines[0], lines[2]] == [{}, {}]
        assert "multi_match" in str(lines[1])
        assert KNN_OF[name](lines[3])["k"] >= 2
    finally:
        await conn.close()


@pytest.mark.parametrize("name", ENGINES)
async def test_a_callers_view_sends_its_authorization_instead_of_the_stores(name: str) -> None:
    engine = CannedEngine(name)
    conn = connector(engine, api_key="store-key")
    await conn.open()
    try:
        assert engine.sent[0].headers["authorization"] == "ApiKey store-key"
        view = conn.for_caller("Bearer caller-token")
        engine.sent.clear()
        await view.search(SearchRequest(limit=1, text="x"))
        await conn.search(SearchRequest(limit=1, text="x"))
        assert [s.headers["authorization"] for s in engine.sent] == [
            "Bearer caller-token",
            "ApiKey store-key",
        ]
        await view.close()  # a view never closes the shared client
        assert await conn.ping() is True
    finally:
        await conn.close()
    assert await conn.ping() is False
