"""A Qdrant server store's connector over a fake transport at its seam (no socket).

``QdrantConnector(spec, transport=httpx.MockTransport(handler))`` hands the transport
to qdrant-client's REST client, so these tests read the requests the connector's logic
builds (the lexical, dense and hybrid queries, filters and scope, timeline, fetch,
key prefixes) and what it makes of each answer, including answers a proxy gives
instead of the server. What the wire itself does (credentials, each refusal over REST
and gRPC, timeouts, TLS) is test_qdrant_wire.py's, on real sockets.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from qdrant_client.http import models

from connectors.base import Condition, Filter, OrderedRequest, SearchRequest
from connectors.errors import (
    ConnectorError,
    EngineAnswerInvalid,
    EngineAnswerUnusable,
    EngineUnavailable,
)
from connectors.qdrant.connector import QdrantConnector
from connectors.qdrant.sparse import LexicalSparseEncoder
from tests.connectors.specs import spec_of
from tests.support import qdrant_wire

COLLECTION = "notes"
DENSE = "text-dense"
SPARSE = "text-sparse"
BASE = f"/collections/{COLLECTION}"
POINTS: list[dict[str, Any]] = [
    {"id": i + 1, "payload": {"text": f"note {i}", "key": f"notes/{k}", "group": "g"}}
    for i, k in enumerate(["a/1", "a/2", "b/1"])
]
Handler = Callable[[httpx.Request], httpx.Response]


def collection_info() -> dict[str, Any]:
    """A hybrid collection: a cosine dense vector of 3, an IDF sparse vector, and indexes."""
    dense = {DENSE: models.VectorParams(size=3, distance=models.Distance.COSINE)}
    info = qdrant_wire.collection_info(len(POINTS), SPARSE, dense)
    return {"result": info.model_dump(mode="json"), "status": "ok", "time": 0.0}


def ok(result: Any) -> httpx.Response:
    return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})


def scored(scores: list[float]) -> list[dict[str, Any]]:
    return [{**p, "version": 1, "score": s} for p, s in zip(POINTS, scores, strict=False)]


class FakeQdrant:
    """A Qdrant server's REST API as a handler: open's two answers, then ``answers``
    (path suffix -> handler) for the reads; every request is kept in ``sent``."""

    def __init__(self, **answers: Handler) -> None:
        self.answers = answers
        self.sent: list[httpx.Request] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        path = request.url.path
        if path == "/":
            return httpx.Response(200, json={"title": "qdrant", "version": "1.18.3"})
        if path == BASE:
            return httpx.Response(200, json=collection_info())
        for suffix, answer in self.answers.items():
            if path == f"{BASE}/{suffix.replace('_', '/')}":
                return answer(request)
        return httpx.Response(404, json={"status": {"error": "no such path"}, "time": 0.0})

    def bodies(self, suffix: str) -> list[Any]:
        path = f"{BASE}/{suffix.replace('_', '/')}"
        return [orjson.loads(r.content) for r in self.sent if r.url.path == path]


def connector(engine: FakeQdrant, retries: int = 0, **search: Any) -> QdrantConnector:
    spec = spec_of(
        {
            "backend": "qdrant",
            "index": COLLECTION,
            "connection": {"url": "http://qdrant.test:6333", "retries": retries},
            "mapping": {
                "content": "text",
                "key": "key",
                "group": "group",
                "created_at": "created_at",
            },
            "search": {"mode": "hybrid", "sparse_vector": SPARSE, "vector_field": DENSE, **search},
            "request_timeout_ms": 5_000,
        }
    )
    return QdrantConnector(spec, transport=engine.transport)


async def opened(engine: FakeQdrant, retries: int = 0) -> QdrantConnector:
    c = connector(engine, retries)
    await c.open()
    return c


PAYLOAD = ["text", "key", "group", "created_at"]


# -- open -----------------------------------------------------------------------------------------


async def test_open_reads_the_collection_then_the_servers_version_through_the_transport() -> None:
    engine = FakeQdrant()
    c = connector(engine)
    info = await c.open()
    await c.close()
    assert [(r.method, r.url.path) for r in engine.sent] == [("GET", BASE), ("GET", "/")]
    assert engine.sent[0].url.host == "qdrant.test"
    assert info.engine == "qdrant 1.18.3"
    assert info.lexical is True
    assert info.vectors is not None
    assert (info.vectors.dimensions, info.vectors.metric) == (3, "cosine")


# -- ranked reads: what each mode asks ------------------------------------------------------------


async def test_a_lexical_query_sends_the_texts_sparse_encoding_on_the_sparse_vector() -> None:
    engine = FakeQdrant(points_query=lambda r: ok({"points": scored([4.0, 2.0, 1.0])}))
    c = await opened(engine)
    hits = await c.search(SearchRequest(limit=2, text="harbour tides"))
    await c.close()
    (body,) = engine.bodies("points_query")
    expected = LexicalSparseEncoder().encode_query("harbour tides")
    assert body["query"] == {
        "nearest": {"indices": list(expected.indices), "values": list(expected.values)}
    }
    assert body["using"] == SPARSE
    assert body["limit"] == 2
    assert body["with_payload"] == PAYLOAD
    assert "filter" not in body
    # Sparse scores have no fixed range: divided by the best of the answer.
    assert [(h.id, h.score) for h in hits] == [("1", 1.0), ("2", 0.5)]
    assert hits[0].source["key"] == "notes/a/1"


async def test_a_dense_query_sends_the_vector_on_the_named_dense_vector() -> None:
    engine = FakeQdrant(points_query=lambda r: ok({"points": scored([0.5, -1.0])}))
    c = await opened(engine)
    hits = await c.search(SearchRequest(limit=2, dense=[0.1, 0.2, 0.3]))
    await c.close()
    (body,) = engine.bodies("points_query")
    assert body["query"] == {"nearest": [0.1, 0.2, 0.3]}
    assert body["using"] == DENSE
    # Cosine similarity s becomes (s + 1) / 2.
    assert [h.score for h in hits] == [0.75, 0.0]


async def test_hybrid_rrf_sends_one_query_fusing_two_prefetches_under_the_filter() -> None:
    engine = FakeQdrant(points_query=lambda r: ok({"points": scored([0.5, 0.25])}))
    c = await opened(engine)
    flt = Filter(must=(Condition("group", ("g",)),))
    request = SearchRequest(
        limit=2, text="tides", dense=[1.0, 0.0, 0.0], filter=flt, candidates=40, rrf_k=20
    )
    hits = await c.search(request)
    await c.close()
    (body,) = engine.bodies("points_query")
    condition = {"key": "group", "match": {"value": "g"}}
    assert body["query"] == {"rrf": {"k": 20}}  # equal weights are not sent
    assert [(p["using"], p["limit"]) for p in body["prefetch"]] == [(SPARSE, 40), (DENSE, 40)]
    assert all(p["filter"] == {"must": [condition]} for p in body["prefetch"])
    assert body["filter"] == {"must": [condition]}
    assert [h.id for h in hits] == ["1", "2"]


async def test_hybrid_rrf_sends_the_weights_when_they_differ() -> None:
    engine = FakeQdrant(points_query=lambda r: ok({"points": scored([0.5])}))
    c = await opened(engine)
    await c.search(SearchRequest(limit=1, text="tides", dense=[1.0, 0, 0], lexical_weight=2.0))
    await c.close()
    (body,) = engine.bodies("points_query")
    assert body["query"] == {"rrf": {"k": 60, "weights": [2.0, 1.0]}}


@pytest.mark.parametrize(("lexical_weight", "dense_weight", "first"), [(3, 1, "1"), (1, 3, "2")])
async def test_a_score_fusion_sends_both_legs_in_one_batch_and_fuses_them_here(
    lexical_weight: float, dense_weight: float, first: str
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        # The sparse leg ranks 1 over 2, the dense leg 2 over 1.
        sparse = scored([3.0, 1.0])
        dense = [
            {**POINTS[1], "version": 1, "score": 0.9},
            {**POINTS[0], "version": 1, "score": -0.5},
        ]
        return ok([{"points": sparse}, {"points": dense}])

    engine = FakeQdrant(points_query_batch=answer)
    c = await opened(engine)
    request = SearchRequest(
        limit=2,
        text="tides",
        dense=[0.0, 1.0, 0.0],
        fusion="zscore",
        candidates=7,
        lexical_weight=lexical_weight,
        dense_weight=dense_weight,
    )
    hits = await c.search(request)
    await c.close()
    (body,) = engine.bodies("points_query_batch")
    assert [(s["using"], s["limit"]) for s in body["searches"]] == [(SPARSE, 7), (DENSE, 7)]
    assert body["searches"][1]["query"] == {"nearest": [0.0, 1.0, 0.0]}
    assert engine.bodies("points_query") == []
    assert [h.id for h in hits] == [first, "2" if first == "1" else "1"]  # the heavier leg's order


async def test_a_query_of_stopwords_only_asks_nothing() -> None:
    engine = FakeQdrant()
    c = await opened(engine)
    assert await c.search(SearchRequest(limit=3, text="the of and")) == []
    await c.close()
    assert [r.url.path for r in engine.sent] == [BASE, "/"]


# -- filters and scope ----------------------------------------------------------------------------


async def test_a_scope_of_several_groups_is_one_match_any_condition() -> None:
    engine = FakeQdrant(points_query=lambda r: ok({"points": []}))
    c = await opened(engine)
    flt = Filter(must=(Condition("group", ("g", "h")), Condition("key", ("notes/a/1",))))
    await c.search(SearchRequest(limit=3, dense=[1.0, 0, 0], filter=flt))
    await c.close()
    (body,) = engine.bodies("points_query")
    assert body["filter"] == {
        "must": [
            {"key": "group", "match": {"any": ["g", "h"]}},
            {"key": "key", "match": {"value": "notes/a/1"}},
        ]
    }


async def test_a_filter_no_point_can_match_asks_nothing() -> None:
    engine = FakeQdrant()
    c = await opened(engine)
    nothing = Filter(must=(Condition("group", ()),))
    assert await c.search(SearchRequest(limit=3, dense=[1.0, 0, 0], filter=nothing)) == []
    assert await c.ordered(OrderedRequest(limit=3, filter=nothing)) == []
    assert await c.fetch(nothing) is None
    await c.close()
    assert len(engine.sent) == 2  # open's two requests only


async def test_a_key_prefix_is_resolved_to_ids_first_and_ranked_under_has_id() -> None:
    def scroll(request: httpx.Request) -> httpx.Response:
        keys = [{"id": p["id"], "payload": {"key": p["payload"]["key"]}} for p in POINTS]
        return ok({"points": keys, "next_page_offset": None})

    engine = FakeQdrant(
        points_scroll=scroll, points_query=lambda r: ok({"points": scored([0.9, 0.8])})
    )
    c = await opened(engine)
    flt = Filter(key_prefix=("key", "notes/a/"))
    hits = await c.search(SearchRequest(limit=3, dense=[1.0, 0, 0], filter=flt))
    await c.close()
    (scan,) = engine.bodies("points_scroll")
    assert scan["with_payload"] == ["key"]  # only the key field is read to resolve the prefix
    # The prefix's complete words as a token prefilter; the exact prefix is checked here.
    words = [{"key": "key", "match": {"text": w}} for w in ("notes", "a")]
    assert scan["filter"] == {"must": words}
    (query,) = engine.bodies("points_query")
    assert {"has_id": [1, 2]} in query["filter"]["must"]  # notes/b/1 is not asked for
    assert [h.id for h in hits] == ["1", "2"]


# -- timeline and fetch ---------------------------------------------------------------------------


@pytest.mark.parametrize(("newest_first", "direction"), [(True, "desc"), (False, "asc")])
async def test_the_timeline_is_a_scroll_ordered_by_created_at(
    newest_first: bool, direction: str
) -> None:
    def scroll(request: httpx.Request) -> httpx.Response:
        return ok({"points": POINTS[:2], "next_page_offset": None})

    engine = FakeQdrant(points_scroll=scroll)
    c = await opened(engine)
    flt = Filter(must=(Condition("group", ("g",)),))
    hits = await c.ordered(OrderedRequest(limit=2, filter=flt, newest_first=newest_first))
    await c.close()
    (body,) = engine.bodies("points_scroll")
    assert body["order_by"] == {"key": "created_at", "direction": direction}
    assert body["limit"] == 2
    assert body["filter"] == {"must": [{"key": "group", "match": {"value": "g"}}]}
    assert body["with_payload"] == PAYLOAD
    assert [h.id for h in hits] == ["1", "2"]


async def test_fetch_scrolls_for_one_point_by_key_and_says_none_when_absent() -> None:
    found: list[dict[str, Any]] = [POINTS[2]]

    def scroll(request: httpx.Request) -> httpx.Response:
        return ok({"points": found, "next_page_offset": None})

    engine = FakeQdrant(points_scroll=scroll)
    c = await opened(engine)
    by_key = Filter(must=(Condition("key", ("notes/b/1",)),))
    hit = await c.fetch(by_key)
    found.clear()
    missing = await c.fetch(by_key)
    await c.close()
    assert hit is not None
    assert (hit.id, hit.source["key"]) == ("3", "notes/b/1")
    assert missing is None
    first = engine.bodies("points_scroll")[0]
    assert first["limit"] == 1
    assert "order_by" not in first
    assert first["filter"] == {"must": [{"key": "key", "match": {"value": "notes/b/1"}}]}


# -- answers that are not Qdrant's ----------------------------------------------------------------

PAGE = b"<!doctype html><html><form action=/login>Sign in</form></html>"
JSON = {"content-type": "application/json"}
NOT_QDRANTS = [
    pytest.param(
        lambda: httpx.Response(200, headers={"content-type": "text/html"}, content=PAGE),
        "the engine answered 200 with text/html, not JSON: "
        "is a login page or proxy in front of the engine?",
        id="login-page",
    ),
    pytest.param(
        lambda: httpx.Response(200, headers=JSON, content=b"<<not json>>"),
        "the engine answered with a body that is not valid JSON",
        id="not-json",
    ),
    pytest.param(
        lambda: httpx.Response(200, headers=JSON, content=b'{"result": "\xff"}'),
        "the engine answered with a body that is not valid JSON",
        id="not-utf8",
    ),
    pytest.param(
        lambda: httpx.Response(200, headers=JSON, content=b""),
        "the engine answered 200 with an empty body, not JSON",
        id="empty",
    ),
    pytest.param(
        lambda: httpx.Response(200, headers=JSON, content=gzip.compress(b'{"result": {}}')),
        "the engine answered 200 with a body still gzip-compressed that its "
        "content-encoding does not declare",
        id="still-compressed",
    ),
    pytest.param(
        lambda: httpx.Response(
            200,
            headers={**JSON, "content-encoding": "gzip"},
            stream=httpx.ByteStream(b'{"result": {}}'),
        ),
        "the engine's compressed answer is broken",
        id="broken-gzip",
    ),
    pytest.param(
        lambda: httpx.Response(502, headers={"content-type": "text/html"}, content=PAGE),
        "the engine's address answered 502 with text/html, not the engine's answer: "
        "is a proxy or load balancer in front of the engine?",
        id="502-page",
    ),
    pytest.param(
        lambda: httpx.Response(407, headers={"content-type": "text/plain"}, content=b"auth"),
        "the engine's address answered 407, which no engine sends to this call: "
        "is a proxy in front of the engine?",
        id="status-never-sent",
    ),
    pytest.param(
        lambda: httpx.Response(302, headers={"location": "https://sso.test/login"}),
        "the engine's address answered 302, a redirect to another address, which the gateway "
        "does not follow: "
        "is a login page or proxy in front of the engine?",
        id="redirect",
    ),
]


@pytest.mark.parametrize(("reply", "says"), NOT_QDRANTS)
async def test_an_answer_that_is_not_qdrants_says_what_came_back_and_is_retried(
    reply: Callable[[], httpx.Response], says: str
) -> None:
    engine = FakeQdrant(points_query=lambda r: reply())
    c = await opened(engine, retries=2)
    with pytest.raises(ConnectorError) as caught:
        await c.search(SearchRequest(limit=2, dense=[1.0, 0, 0]))
    await c.close()
    assert type(caught.value) is EngineAnswerInvalid
    assert isinstance(caught.value, EngineUnavailable)  # the gateway's retryable trouble
    assert str(caught.value) == says
    assert len(engine.bodies("points_query")) == 3  # a try and two retries
    assert "qdrant.test" not in says


@pytest.mark.parametrize(
    "result",
    [
        pytest.param({"ok": True}, id="no-result"),
        pytest.param({"result": "not points", "status": "ok"}, id="another-shape"),
    ],
)
async def test_json_that_is_not_a_qdrant_answer_is_unusable_and_not_retried(
    result: dict[str, Any],
) -> None:
    engine = FakeQdrant(points_query=lambda r: httpx.Response(200, json=result))
    c = await opened(engine, retries=2)
    with pytest.raises(EngineAnswerUnusable) as caught:
        await c.search(SearchRequest(limit=2, dense=[1.0, 0, 0]))
    await c.close()
    assert "not the answer qdrant-client asked for" in str(caught.value)
    assert len(engine.bodies("points_query")) == 1


async def test_a_login_page_at_open_fails_open_with_the_sentence_and_the_next_open_reads() -> None:
    pages = [httpx.Response(200, headers={"content-type": "text/html"}, content=PAGE)]
    engine = FakeQdrant()
    healthy = engine.handle

    def handle(request: httpx.Request) -> httpx.Response:
        return pages.pop() if pages else healthy(request)

    engine.transport = httpx.MockTransport(handle)
    c = connector(engine)
    with pytest.raises(EngineAnswerInvalid) as caught:
        await c.open()
    assert "text/html" in str(caught.value)
    info = await c.open()  # the proxy lets the next request through: the store opens
    await c.close()
    assert info.engine == "qdrant 1.18.3"
