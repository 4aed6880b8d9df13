"""How many engine round trips each search costs, counted by a recording proxy.

The proxy sits between the connector and the real node; the connector opens
through it (mapping, version), then the count starts. A hybrid search is one
``_msearch`` holding both legs; legs up to 2 x limit deep return their documents
(one round trip), deeper ones ids only, and the fused page is re-read (two).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest

from connectors.base import SearchRequest
from connectors.lucene.connector import LuceneConnector
from gateway.config import parse_config
from gateway.runtime import Gateway
from tests.connectors.conftest import Loaded, make_connector, scifact_store, scifact_store_data
from tests.support.recording_proxy import Recorded, recording_proxy

pytestmark = pytest.mark.integration

ENGINES = [
    pytest.param("es_loaded", marks=pytest.mark.elasticsearch, id="elasticsearch"),
    pytest.param("os_loaded", marks=pytest.mark.opensearch, id="opensearch"),
]


@pytest.fixture(params=ENGINES)
def loaded(request: pytest.FixtureRequest) -> Loaded:
    result: Loaded = request.getfixturevalue(request.param)
    return result


@pytest.fixture
def proxied(loaded: Loaded) -> Iterator[tuple[Loaded, list[Recorded]]]:
    with recording_proxy(loaded.url) as (url, seen):
        yield replace(loaded, url=url), seen


@pytest.fixture
async def counted(
    proxied: tuple[Loaded, list[Recorded]],
) -> AsyncIterator[tuple[LuceneConnector, list[Recorded], Loaded]]:
    loaded, seen = proxied
    conn = make_connector(scifact_store(loaded))
    await conn.open()
    seen.clear()  # open()'s mapping and version reads are not the searches'
    try:
        yield conn, seen, loaded
    finally:
        await conn.close()


def _request(loaded: Loaded, **kw: object) -> SearchRequest:
    qid = next(q for q in loaded.sf.query_ids if q in loaded.sf.qrels)
    base = SearchRequest(
        limit=10,
        text=loaded.sf.queries[qid],
        dense=loaded.sf.query_vector(qid),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def _paths(seen: list[Recorded]) -> list[str]:
    return [r.path.split("?")[0].rsplit("/", 1)[-1] for r in seen]


async def test_a_shallow_hybrid_search_is_one_msearch_of_two_legs_with_their_documents(
    counted: tuple[LuceneConnector, list[Recorded], Loaded],
) -> None:
    conn, seen, loaded = counted
    hits = await conn.search(_request(loaded, candidates=20))
    assert len(hits) == 10
    assert _paths(seen) == ["_msearch"]
    lines = seen[0].body
    assert isinstance(lines, list)
    assert len(lines) == 4  # header, lexical leg, header, kNN leg
    # The fused page needs no re-read: every hit came back with its mapped fields.
    assert all(h.source.get("key") and h.source.get("text") for h in hits)


async def test_a_deep_hybrid_search_is_one_msearch_of_id_legs_and_one_re_read(
    counted: tuple[LuceneConnector, list[Recorded], Loaded],
) -> None:
    conn, seen, loaded = counted
    hits = await conn.search(_request(loaded, candidates=100))
    assert _paths(seen) == ["_msearch", "_search"]
    lines = seen[0].body
    assert isinstance(lines, list)
    assert [line["_source"] for line in lines[1::2]] == [False, False]
    assert len(hits) == 10
    assert all(h.source.get("key") and h.source.get("text") for h in hits)


async def test_a_one_sided_weight_is_one_msearch_of_one_leg(
    counted: tuple[LuceneConnector, list[Recorded], Loaded],
) -> None:
    conn, seen, loaded = counted
    hits = await conn.search(_request(loaded, lexical_weight=0.0, dense_weight=1.0, candidates=20))
    assert hits
    assert _paths(seen) == ["_msearch"]
    assert isinstance(seen[0].body, list)
    assert len(seen[0].body) == 2


@pytest.mark.parametrize(
    "kw",
    [{"dense": None}, {"text": None}],
    ids=["lexical", "dense"],
)
async def test_a_single_mode_search_is_one_search(
    counted: tuple[LuceneConnector, list[Recorded], Loaded], kw: dict[str, object]
) -> None:
    conn, seen, loaded = counted
    assert await conn.search(_request(loaded, **kw))
    assert _paths(seen) == ["_search"]


def _ks(node: object) -> list[int]:
    """Every ``k`` in a search body (kNN depth, wherever the dialect puts it)."""
    if isinstance(node, dict):
        own = [node["k"]] if isinstance(node.get("k"), int) else []
        return own + [k for v in node.values() for k in _ks(v)]
    if isinstance(node, list):
        return [k for v in node for k in _ks(v)]
    return []


async def test_fusion_depth_sizes_the_legs_and_a_knn_search_keeps_its_candidates(
    counted: tuple[LuceneConnector, list[Recorded], Loaded],
) -> None:
    conn, seen, loaded = counted
    hits = await conn.search(_request(loaded, candidates=100, fusion_depth=20))
    assert len(hits) == 10
    assert _paths(seen) == ["_msearch"]  # 20 <= 2 x limit: legs with their documents
    legs = seen[0].body
    assert isinstance(legs, list)
    assert [leg["size"] for leg in legs[1::2]] == [20, 20]
    assert _ks(legs[3]) == [20]
    seen.clear()
    assert await conn.search(_request(loaded, text=None, candidates=100, fusion_depth=20))
    assert _paths(seen) == ["_search"]
    assert _ks(seen[0].body) == [100]


@pytest.mark.parametrize(
    ("candidates", "paths", "depth"),
    [
        pytest.param(None, ["_msearch"], 20, id="unset-2x-limit"),
        pytest.param(30, ["_msearch", "_search"], 30, id="set-30"),
    ],
)
async def test_a_gateway_hybrid_recall_asks_legs_as_deep_as_the_store_says(
    proxied: tuple[Loaded, list[Recorded]], candidates: int | None, paths: list[str], depth: int
) -> None:
    loaded, seen = proxied
    # Lexical mode with a vector field: a recall that brings its own embedding is hybrid.
    search: dict[str, object] = {"mode": "lexical", "embedder": {"kind": "none"}}
    if candidates is not None:
        search["candidates"] = candidates
    gateway = Gateway(parse_config({"stores": {"s": scifact_store_data(loaded, search=search)}}))
    qid = next(q for q in loaded.sf.query_ids if q in loaded.sf.qrels)
    try:
        dispatcher = gateway.dispatcher("s")
        await dispatcher.dispatch("memory/describe", {})  # opens the store
        seen.clear()
        result = await dispatcher.dispatch(
            "memory/recall",
            {
                "query": loaded.sf.queries[qid],
                "embedding": loaded.sf.query_vector(qid),
                "limit": 10,
            },
        )
    finally:
        await gateway.close()
    assert len(result["records"]) == 10
    assert _paths(seen) == paths
    legs = seen[0].body
    assert isinstance(legs, list)
    assert [leg["size"] for leg in legs[1::2]] == [depth, depth]
