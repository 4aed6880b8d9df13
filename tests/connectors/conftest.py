"""Fixtures of the Elasticsearch/OpenSearch connector tests, and the suite both engines pass.

Each engine gets one SciFact index per session (loaded by
:mod:`tests.support.lucene_loader`, skipped when already complete). The
shared :class:`LuceneSuite` holds every test that must hold on both engines;
``test_elasticsearch.py`` and ``test_opensearch.py`` subclass it with their
engine's name and marks, and add what is specific to one engine.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any, ClassVar, TypeVar

import numpy as np
import pytest

from bench.soak.proxy import FaultProxy, relay_to
from connectors.base import (
    ID_FIELD,
    Condition,
    Connector,
    Filter,
    Hit,
    OrderedRequest,
    SearchRequest,
    TimeWindows,
    VectorInfo,
)
from connectors.errors import EngineConfigError, EngineTimeout, EngineUnavailable
from connectors.lucene.connector import LuceneConnector
from connectors.retry import deadline_scope
from connectors.spec import ConnectorSpec
from gateway.a2m.records import format_timestamp, parse_timestamp
from tests.connectors.specs import merged, spec_of
from tests.support import lucene_loader
from tests.support.lucene_loader import Engine, LoadResult
from tests.support.scifact import SciFact, load_scifact

INDEX = "a2m-test-scifact"
T = TypeVar("T")


@dataclass(frozen=True)
class Loaded:
    engine: Engine
    url: str
    index: str
    sf: SciFact
    load: LoadResult


@pytest.fixture(scope="session")
def scifact(scifact_dir: Any) -> SciFact:
    return load_scifact(scifact_dir)


def _load(engine: Engine, url: str, sf: SciFact) -> Loaded:
    result = lucene_loader.load_index(engine, url, INDEX, sf)
    print(  # shown with -s / in the -ra summary of a failing run: load timings matter in CI
        f"\n{engine}: {result.count} docs in {INDEX} "
        f"{'loaded' if result.loaded else 'already present'} in {result.seconds:.1f}s"
    )
    return Loaded(engine, url, INDEX, sf, result)


@pytest.fixture(scope="session")
def es_loaded(elasticsearch_url: str, scifact: SciFact) -> Loaded:
    return _load("elasticsearch", elasticsearch_url, scifact)


@pytest.fixture(scope="session")
def os_loaded(opensearch_url: str, scifact: SciFact) -> Loaded:
    return _load("opensearch", opensearch_url, scifact)


POOL = 8
"""Connections a guarded store's client pools (``connection.pool_maxsize``)."""


@pytest.fixture
async def proxy(request: pytest.FixtureRequest) -> AsyncIterator[FaultProxy]:
    """The soak's FaultProxy in front of the SciFact node of the test's ``engine`` param."""
    engine = request.node.callspec.params["engine"]
    loaded: Loaded = request.getfixturevalue(
        "es_loaded" if engine == "elasticsearch" else "os_loaded"
    )
    async with relay_to(loaded.url) as p:
        yield p


def guarded_store(engine: str, url: str, **resilience: Any) -> dict[str, Any]:
    """A lexical SciFact store at ``url`` with the given ``resilience`` section.

    ``retries: 0``: no retry of the connector's hides what a fault does to a call.
    """
    return {
        "backend": engine,
        "index": INDEX,
        "connection": {"hosts": [url], "retries": 0, "pool_maxsize": POOL},
        "mapping": {"id": "doc_id", "content": "text", "created_at": "created_at"},
        "search": {"mode": "lexical", "text_fields": ["title", "text"]},
        "request_timeout_ms": 5000,
        "resilience": resilience,
    }


def scifact_store_data(loaded: Loaded, **over: Any) -> dict[str, Any]:
    """The SciFact store on ``loaded``'s engine as config sections; overrides merge key by key."""
    data: dict[str, Any] = {
        "backend": loaded.engine,
        "index": loaded.index,
        "connection": {"hosts": [loaded.url], "timeout_ms": 30_000},
        "mapping": {
            "id": "doc_id",
            "content": "text",
            "key": "key",
            "group": "group",
            "created_at": "created_at",
            "metadata": ["title"],
        },
        "search": {
            "mode": "hybrid",
            "text_fields": ["title", "text"],
            "vector_field": "embedding",
            "embedder": {"kind": "local", "model": "all-MiniLM-L6-v2"},
        },
    }
    return merged(data, over)


def scifact_store(loaded: Loaded, **over: Any) -> ConnectorSpec[Any]:
    return spec_of(scifact_store_data(loaded, **over))


def make_connector(config: ConnectorSpec[Any], **kw: Any) -> LuceneConnector:
    return LuceneConnector(config, **kw)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bounded_gather(calls: Sequence[Callable[[], Awaitable[T]]], limit: int = 8) -> list[T]:
    """Run the calls with at most ``limit`` in flight, results in call order."""
    sem = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with sem:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


def ndcg_at_10(ranked: Sequence[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal if ideal else 0.0


def recall_at_10(ranked: Sequence[str], relevant: set[str]) -> float:
    return len(set(ranked[:10]) & relevant) / len(relevant) if relevant else 0.0


def multi_match(config: ConnectorSpec[Any], text: str) -> dict[str, Any]:
    """The multi_match a person would write by hand for the store (for the parity check)."""
    return {
        "multi_match": {
            "query": text,
            "fields": list(config.search.text_fields),
            "type": "best_fields",
        }
    }


def _engine_of(request: pytest.FixtureRequest) -> Engine:
    engine: Engine | None = getattr(request.cls, "engine", None)
    if engine is None:
        raise RuntimeError("this fixture serves LuceneSuite subclasses only")
    return engine


@pytest.fixture(scope="class")
def loaded(request: pytest.FixtureRequest) -> Loaded:
    """The loaded SciFact index of the test class's engine."""
    name = "es_loaded" if _engine_of(request) == "elasticsearch" else "os_loaded"
    result: Loaded = request.getfixturevalue(name)
    return result


@pytest.fixture
async def conn(loaded: Loaded) -> AsyncIterator[LuceneConnector]:
    """An open connector on the SciFact store (default config)."""
    c = make_connector(scifact_store(loaded))
    await c.open()
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(scope="class")
async def direct(loaded: Loaded) -> AsyncIterator[Any]:
    """The engine's own async client, for checks that bypass the connector."""
    client: Any
    if loaded.engine == "elasticsearch":
        from elasticsearch import AsyncElasticsearch

        client = AsyncElasticsearch(loaded.url, request_timeout=30)
    else:
        from opensearchpy import AsyncOpenSearch

        client = AsyncOpenSearch(hosts=[loaded.url], timeout=30)
    try:
        yield client
    finally:
        await client.close()


class LuceneSuite:
    """Tests both engines must pass; subclasses set ``engine`` and the marks."""

    engine: ClassVar[Engine]

    async def knn_score_tolerance(self, direct: Any) -> float:
        """How far a kNN score may sit from the exact (1 + cos) / 2 on this node."""
        return 1e-5

    async def direct_search(self, direct: Any, loaded: Loaded, body: dict[str, Any]) -> list[Any]:
        response = await direct.search(index=loaded.index, body=body)
        data = response.body if hasattr(response, "body") else response
        hits: list[Any] = data["hits"]["hits"]
        return hits

    # ---- describe

    async def test_open_reads_the_mapping(self, loaded: Loaded) -> None:
        c = make_connector(scifact_store(loaded))
        info = await c.open()
        await c.close()
        assert info.engine.startswith(self.engine)
        assert info.vectors == VectorInfo(384, "cosine", ("cosine", "dot", "l2"))
        assert info.lexical is True

    async def test_connector_satisfies_the_protocol(self, conn: LuceneConnector) -> None:
        assert isinstance(conn, Connector)
        assert await conn.ping() is True

    async def test_missing_index_names_the_key(self, loaded: Loaded) -> None:
        c = make_connector(scifact_store(loaded, index="a2m-no-such-index"))
        with pytest.raises(EngineConfigError, match=r"^index:"):
            await c.open()

    @pytest.mark.parametrize(
        ("over", "key"),
        [
            ({"search": {"text_fields": ["title", "abstract"]}}, "search.text_fields"),
            ({"search": {"vector_field": "vec"}}, "search.vector_field"),
            ({"search": {"vector_field": "title"}}, "search.vector_field"),
            ({"mapping": {"created_at": "published"}}, "mapping.created_at"),
            ({"mapping": {"key": "text"}}, "mapping.key"),
        ],
    )
    async def test_missing_or_wrong_field_names_the_key(
        self, loaded: Loaded, over: dict[str, Any], key: str
    ) -> None:
        c = make_connector(scifact_store(loaded, **over))
        with pytest.raises(EngineConfigError) as info:
            await c.open()
        assert str(info.value).startswith(key)

    # ---- lexical

    async def test_bm25_ranks_exactly_as_the_engine(
        self, loaded: Loaded, conn: LuceneConnector, direct: Any
    ) -> None:
        """The headline check: every train query, identical top-10 ids."""
        config = scifact_store(loaded)
        queries = [loaded.sf.queries[q] for q in loaded.sf.query_ids]

        async def pair(text: str) -> tuple[list[Hit], list[Any]]:
            ours = await conn.search(SearchRequest(limit=10, text=text))
            theirs = await self.direct_search(
                direct, loaded, {"query": multi_match(config, text), "size": 10}
            )
            return ours, theirs

        results = await bounded_gather([partial(pair, t) for t in queries])
        identical = 0
        for ours, theirs in results:
            if [h.id for h in ours] == [h["_id"] for h in theirs]:
                identical += 1
            if theirs:
                top = theirs[0]["_score"]
                expected = [h["_score"] / top for h in theirs]
                assert [h.score for h in ours] == pytest.approx(expected)
        print(f"\n{self.engine}: BM25 parity {identical}/{len(queries)} identical top-10")
        assert identical == len(queries) == 809

    async def test_lexical_scores_are_normalised(self, conn: LuceneConnector) -> None:
        hits = await conn.search(SearchRequest(limit=20, text="vitamin D deficiency"))
        scores = [h.score for h in hits]
        assert scores[0] == 1.0
        assert all(s is not None and 0 <= s <= 1 for s in scores)
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]

    async def test_query_syntax_in_text_is_just_words(self, conn: LuceneConnector) -> None:
        # Would be a syntax error (or match everything) in query_string.
        for text in ['title:"x" AND (', "*", "text:/.*/ OR", "\\"]:
            await conn.search(SearchRequest(limit=5, text=text))

    # ---- vectors

    async def test_knn_recall(self, loaded: Loaded, conn: LuceneConnector) -> None:
        sf = loaded.sf
        qids = [q for q in sf.query_ids if q in sf.qrels]

        async def one(qid: str) -> list[Hit]:
            return await conn.search(SearchRequest(limit=10, dense=sf.query_vector(qid)))

        results = await bounded_gather([partial(one, q) for q in qids])
        recall = float(
            np.mean(
                [
                    recall_at_10([h.id for h in r], sf.qrels[q])
                    for q, r in zip(qids, results, strict=True)
                ]
            )
        )
        ndcg = float(
            np.mean(
                [
                    ndcg_at_10([h.id for h in r], sf.qrels[q])
                    for q, r in zip(qids, results, strict=True)
                ]
            )
        )
        print(f"\n{self.engine}: kNN recall@10 {recall:.4f} nDCG@10 {ndcg:.4f} over {len(qids)}")
        # Exact cosine search over these vectors (numpy) gives recall@10 0.7856 and
        # nDCG@10 0.6602; HNSW with 100 candidates must stay within a point of it.
        assert recall >= 0.775

    async def test_knn_scores_are_half_of_one_plus_cosine(
        self, loaded: Loaded, conn: LuceneConnector, direct: Any
    ) -> None:
        # A raw cosine would sit (1 - cos) / 2, about 0.2 here, off: far outside any tolerance.
        tolerance = await self.knn_score_tolerance(direct)
        sf = loaded.sf
        q = sf.query_ids[0]
        qv = np.array(sf.query_vector(q))
        hits = await conn.search(SearchRequest(limit=5, dense=sf.query_vector(q)))
        assert len(hits) == 5
        for h in hits:
            cos = float(np.dot(qv, np.array(sf.doc_vector(h.id))))
            assert h.score == pytest.approx((1 + cos) / 2, abs=tolerance)

    async def test_knn_filter_keeps_k_results(self, loaded: Loaded, conn: LuceneConnector) -> None:
        sf = loaded.sf
        flt = Filter(key_prefix=("key", "scifact/1"))
        hits = await conn.search(
            SearchRequest(limit=10, dense=sf.query_vector(sf.query_ids[3]), filter=flt)
        )
        assert len(hits) == 10
        assert all(h.source["key"].startswith("scifact/1") for h in hits)

    async def test_with_vectors_returns_the_stored_vector(
        self, loaded: Loaded, conn: LuceneConnector
    ) -> None:
        sf = loaded.sf
        hits = await conn.search(
            SearchRequest(limit=3, dense=sf.query_vector(sf.query_ids[0]), with_vectors=True)
        )
        assert len(hits) == 3
        for h in hits:
            assert h.vector == pytest.approx(sf.doc_vector(h.id), abs=1e-6)
            assert "embedding" not in h.source
        plain = await conn.search(SearchRequest(limit=3, text="cancer"))
        assert len(plain) == 3
        assert all(h.vector is None and "embedding" not in h.source for h in plain)

    # ---- hybrid

    async def test_hybrid_fuses_both_legs(self, loaded: Loaded, conn: LuceneConnector) -> None:
        sf = loaded.sf
        qids = [q for q in sf.query_ids if q in sf.qrels]

        async def run(qid: str) -> dict[str, list[str]]:
            text, vec = sf.queries[qid], sf.query_vector(qid)
            lex = await conn.search(SearchRequest(limit=10, text=text))
            den = await conn.search(SearchRequest(limit=10, dense=vec))
            hyb = await conn.search(SearchRequest(limit=10, text=text, dense=vec))
            assert len(hyb) == 10
            assert all(h.score is not None and 0 <= h.score <= 1 for h in hyb)
            return {
                "lexical": [h.id for h in lex],
                "dense": [h.id for h in den],
                "hybrid": [h.id for h in hyb],
            }

        runs = await bounded_gather([partial(run, q) for q in qids])
        ndcg = {
            mode: float(
                np.mean([ndcg_at_10(r[mode], sf.qrels[q]) for q, r in zip(qids, runs, strict=True)])
            )
            for mode in ("lexical", "dense", "hybrid")
        }
        print(f"\n{self.engine}: nDCG@10 " + ", ".join(f"{k} {v:.4f}" for k, v in ndcg.items()))
        assert ndcg["hybrid"] > max(ndcg["lexical"], ndcg["dense"])

    async def test_hybrid_weights_steer_the_fusion(
        self, loaded: Loaded, conn: LuceneConnector
    ) -> None:
        sf = loaded.sf
        q = sf.query_ids[5]
        text, vec = sf.queries[q], sf.query_vector(q)
        lex = await conn.search(SearchRequest(limit=10, text=text))
        den = await conn.search(SearchRequest(limit=10, dense=vec))
        only_lex = await conn.search(
            SearchRequest(limit=10, text=text, dense=vec, dense_weight=0.0)
        )
        only_den = await conn.search(
            SearchRequest(limit=10, text=text, dense=vec, lexical_weight=0.0)
        )
        assert [h.id for h in only_lex] == [h.id for h in lex]
        assert [h.id for h in only_den] == [h.id for h in den]
        assert only_lex[0].score == 1.0

    # ---- filters

    async def test_equality_filters(self, conn: LuceneConnector) -> None:
        one = Filter(must=(Condition("group", ("g001",)),))
        hits = await conn.search(SearchRequest(limit=50, text="cell", filter=one))
        assert hits
        assert {h.source["group"] for h in hits} == {"g001"}
        many = Filter(must=(Condition("group", ("g001", "g002")),))
        hits = await conn.search(SearchRequest(limit=50, text="cell", filter=many))
        assert {h.source["group"] for h in hits} <= {"g001", "g002"}
        assert len({h.source["group"] for h in hits}) == 2

    async def test_ids_filter(self, conn: LuceneConnector) -> None:
        flt = Filter(must=(Condition(ID_FIELD, ("4983", "5836", "missing")),))
        ordered = await conn.ordered(OrderedRequest(limit=10, filter=flt))
        assert sorted(h.id for h in ordered) == ["4983", "5836"]
        by_field = Filter(must=(Condition("doc_id", ("4983",)),))
        assert [h.id for h in await conn.ordered(OrderedRequest(limit=10, filter=by_field))] == [
            "4983"
        ]

    async def test_key_prefix(self, loaded: Loaded, conn: LuceneConnector) -> None:
        flt = Filter(key_prefix=("key", "scifact/12"))
        got = await conn.ordered(OrderedRequest(limit=10_000, filter=flt))
        expected = {d for d in loaded.sf.corpus_ids if d.startswith("12")}
        assert {h.id for h in got} == expected
        assert len(got) == len(expected)

    async def test_time_windows(self, loaded: Loaded, conn: LuceneConnector) -> None:
        # Three documents share each minute in the loader; a 1-minute window holds all three,
        # a 1-ms window at that instant holds the same three (they share the timestamp).
        newest = await conn.ordered(OrderedRequest(limit=1))
        stamp = str(newest[0].source["created_at"])
        ts = parse_timestamp(stamp)
        assert ts is not None
        start = format_timestamp(ts)
        end = format_timestamp(ts + timedelta(milliseconds=1))
        flt = Filter(times=(TimeWindows("created_at", ((start, end),)),))
        got = await conn.ordered(OrderedRequest(limit=100, filter=flt))
        assert got
        assert {h.source["created_at"] for h in got} == {stamp}
        ranked = await conn.search(SearchRequest(limit=100, text="cell", filter=flt))
        assert ranked, "no ranked hit to check the filter on"
        assert all(h.source["created_at"] == stamp for h in ranked)
        empty = Filter(
            times=(
                TimeWindows(
                    "created_at", (("1999-01-01T00:00:00.000Z", "1999-01-01T00:00:00.001Z"),)
                ),
            )
        )
        assert await conn.ordered(OrderedRequest(limit=10, filter=empty)) == []

    async def test_content_phrase_condition(self, loaded: Loaded, conn: LuceneConnector) -> None:
        doc = (await conn.ordered(OrderedRequest(limit=1)))[0]
        text = str(doc.source["text"])
        flt = Filter(must=(Condition("text", (text,), phrase=True),))
        got = await conn.ordered(OrderedRequest(limit=10, filter=flt))
        assert doc.id in {h.id for h in got}

    async def test_unmapped_field_matches_nothing(
        self, loaded: Loaded, conn: LuceneConnector, direct: Any
    ) -> None:
        flt = Filter(must=(Condition("no_such_field", ("x",)),))
        assert await conn.search(SearchRequest(limit=10, text="cancer", filter=flt)) == []
        assert await conn.ordered(OrderedRequest(limit=10, filter=flt)) == []
        # The engine itself says so, not only the connector.
        body = {"query": {"bool": {"filter": [{"term": {"no_such_field": "x"}}]}}, "size": 1}
        assert await self.direct_search(direct, loaded, body) == []

    async def test_unmapped_field_is_never_returned(self, conn: LuceneConnector) -> None:
        # `acl` is in every document but not in the store's mapping.
        hits = await conn.search(SearchRequest(limit=50, text="protein"))
        hits += await conn.ordered(OrderedRequest(limit=50))
        assert len(hits) > 50
        allowed = {"text", "key", "group", "created_at", "doc_id", "title"}
        for h in hits:
            assert set(h.source) <= allowed
            assert "acl" not in h.source

    # ---- ordered reads

    def expected_order(self, loaded: Loaded, *, newest_first: bool) -> list[str]:
        sf = loaded.sf
        keyed = [(lucene_loader.created_at(i), d) for i, d in enumerate(sf.corpus_ids)]
        keyed.sort(reverse=newest_first)
        return [d for _, d in keyed]

    async def test_newest_first_and_ascending(self, loaded: Loaded, conn: LuceneConnector) -> None:
        newest = await conn.ordered(OrderedRequest(limit=25))
        assert [h.id for h in newest] == self.expected_order(loaded, newest_first=True)[:25]
        assert all(h.score is None for h in newest)
        oldest = await conn.ordered(OrderedRequest(limit=25, newest_first=False))
        assert [h.id for h in oldest] == self.expected_order(loaded, newest_first=False)[:25]

    async def test_search_after_pages_across_pages(self, loaded: Loaded) -> None:
        # Page size 7 cuts runs of equal timestamps (three per minute): the tie-break must hold.
        small = make_connector(scifact_store(loaded), page_size=7)
        await small.open()
        try:
            got = await small.ordered(OrderedRequest(limit=100, newest_first=False))
        finally:
            await small.close()
        assert [h.id for h in got] == self.expected_order(loaded, newest_first=False)[:100]

    async def test_the_whole_index_in_pages(self, loaded: Loaded, conn: LuceneConnector) -> None:
        every = await conn.ordered(OrderedRequest(limit=6000))
        assert [h.id for h in every] == self.expected_order(loaded, newest_first=True)

    async def test_engine_id_order_uses_a_point_in_time(self, loaded: Loaded) -> None:
        config = scifact_store(loaded, mapping={"id": "_id"})
        small = make_connector(config, page_size=250)
        await small.open()
        try:
            first = await small.ordered(OrderedRequest(limit=6000))
            again = await small.ordered(OrderedRequest(limit=6000))
        finally:
            await small.close()
        ids = [h.id for h in first]
        assert len(ids) == len(set(ids)) == len(loaded.sf.corpus_ids)
        stamps = [h.source["created_at"] for h in first]
        assert stamps == sorted(stamps, reverse=True)
        assert [h.id for h in again] == ids

    async def test_without_created_at_the_id_orders(self, loaded: Loaded) -> None:
        config = scifact_store(loaded, mapping={"created_at": None})
        c = make_connector(config, page_size=50)
        await c.open()
        try:
            got = await c.ordered(OrderedRequest(limit=120, newest_first=False))
        finally:
            await c.close()
        assert [h.id for h in got] == sorted(loaded.sf.corpus_ids)[:120]

    # ---- fetch, collapse, highlight

    async def test_fetch_by_key(self, loaded: Loaded, conn: LuceneConnector) -> None:
        hit = await conn.fetch(Filter(must=(Condition("key", ("scifact/4983",)),)))
        assert hit is not None
        assert hit.id == "4983"
        assert hit.source["text"] == loaded.sf.texts["4983"]
        assert hit.score is None
        with_vec = await conn.fetch(
            Filter(must=(Condition("key", ("scifact/4983",)),)), with_vectors=True
        )
        assert with_vec is not None
        assert with_vec.vector == pytest.approx(loaded.sf.doc_vector("4983"), abs=1e-6)
        assert await conn.fetch(Filter(must=(Condition("key", ("scifact/nope",)),))) is None

    async def test_collapse_keeps_each_groups_best(self, loaded: Loaded) -> None:
        plain = make_connector(scifact_store(loaded))
        folded = make_connector(scifact_store(loaded, search={"collapse_group": True}))
        await plain.open()
        await folded.open()
        try:
            text = "cancer cells"
            deep = await plain.search(SearchRequest(limit=200, text=text))
            got = await folded.search(SearchRequest(limit=10, text=text))
            vec = loaded.sf.query_vector(loaded.sf.query_ids[0])
            hybrid = await folded.search(SearchRequest(limit=10, text=text, dense=vec))
            dense = await folded.search(SearchRequest(limit=10, dense=vec))
        finally:
            await plain.close()
            await folded.close()
        firsts: list[str] = []
        seen: set[str] = set()
        for h in deep:
            if h.source["group"] not in seen:
                seen.add(h.source["group"])
                firsts.append(h.id)
        assert [h.id for h in got] == firsts[:10]
        for hits in (hybrid, dense):
            groups = [h.source["group"] for h in hits]
            assert len(groups) == len(set(groups)) == 10

    async def test_highlight_fragment(self, loaded: Loaded) -> None:
        c = make_connector(
            scifact_store(loaded, search={"highlight": True, "highlight_fragment_size": 120})
        )
        await c.open()
        text = "vitamin D deficiency"
        vec = loaded.sf.query_vector(loaded.sf.query_ids[0])
        try:
            hits = await c.search(SearchRequest(limit=10, text=text))
            hybrid = await c.search(SearchRequest(limit=10, text=text, dense=vec))
        finally:
            await c.close()
        with_fragment = [h for h in hits + hybrid if h.highlight]
        assert hits
        assert all(h.highlight for h in hits)
        # Hybrid legs fetch no documents, yet the lexical leg's fragments survive.
        assert any(h.highlight for h in hybrid)
        for h in with_fragment:
            assert h.highlight is not None
            assert h.highlight in h.source["text"]  # plain text: no tags were added
            assert len(h.highlight) < len(h.source["text"])

    # ---- failures

    async def test_nothing_listening_is_unavailable_quickly(self, loaded: Loaded) -> None:
        port = free_port()
        config = scifact_store(loaded, connection={"hosts": [f"http://127.0.0.1:{port}"]})
        c = make_connector(config)
        started = time.monotonic()
        with pytest.raises(EngineUnavailable) as info:
            await c.open()
        elapsed = time.monotonic() - started
        message = str(info.value)
        assert elapsed < 5
        assert "127.0.0.1" not in message
        assert str(port) not in message
        assert info.value.retry_after_ms > 0
        assert await c.ping() is False
        await c.close()

    async def test_reads_on_a_closed_connector_are_unavailable(self, loaded: Loaded) -> None:
        c = make_connector(scifact_store(loaded))
        await c.open()
        await c.close()
        with pytest.raises(EngineUnavailable):
            await c.ordered(OrderedRequest(limit=1))
        with pytest.raises(EngineUnavailable):
            await c.search(SearchRequest(limit=1, text="cancer"))

    async def test_ping_after_close_is_false_and_builds_no_client(self, loaded: Loaded) -> None:
        c = make_connector(scifact_store(loaded))
        await c.open()
        assert await c.ping() is True  # control: the engine is up
        await c.close()
        assert await c.ping() is False
        assert c._engine.client is None

    async def test_spent_deadline_is_a_timeout(self, conn: LuceneConnector) -> None:
        with pytest.raises(EngineTimeout):
            async with deadline_scope(0.0):
                await conn.search(SearchRequest(limit=10, text="cancer"))
