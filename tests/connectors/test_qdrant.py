"""QdrantConnector against qdrant-edge in this process and a real Qdrant server (REST and gRPC).

Every test that takes ``loaded`` runs on three targets: qdrant-edge in this
process, and the server of ``tests/engines/engines.py`` over REST and over gRPC
(``prefer_grpc``), each loaded with the same SciFact subset: every judged
document of the first 100 train queries plus 1,000 unjudged ones (1,080
points), with the shared all-MiniLM-L6-v2 vectors and the project's lexical
sparse vectors. Answers a server cannot be made to give on demand (a 503, a
hang) come from a tiny HTTP peer of our own on loopback; the server's own
refusals are in test_qdrant_server.py.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connectors.base import (
    ID_FIELD,
    Condition,
    Connector,
    Filter,
    Fusion,
    OrderedRequest,
    SearchRequest,
    SparseVector,
)
from connectors.errors import (
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
)
from connectors.fusion import fuse
from connectors.qdrant.connector import ENCODE_INLINE_CHARS, QdrantConnector
from connectors.qdrant.query import (
    AllOf,
    Match,
    MatchAnyOf,
    NoneOf,
    prefix_words,
    translate_filter,
)
from connectors.qdrant.sparse import LexicalSparseEncoder
from connectors.retry import deadline_scope
from connectors.spec import ConnectorSpec
from tests.conftest import QdrantServer
from tests.connectors.specs import merged, spec_of
from tests.support.http_peer import HttpPeer, PeerReply, StartPeer
from tests.support.scifact import SciFact, documents, load_qdrant, load_scifact, subset

pytestmark = pytest.mark.integration

# Measured on this subset (see the module docstring): hit@10 dense 0.92,
# sparse 0.87, hybrid 0.93. The thresholds leave room for engine-version noise
# but would catch a broken leg, filter or fusion.
MIN_HIT_AT_10 = {"dense": 0.88, "sparse": 0.82}


ENGINE = {"local": "qdrant edge (qdrant-edge-py ", "rest": "qdrant 1.", "grpc": "qdrant 1."}
TARGETS = list(ENGINE)
"""qdrant-edge in this process; the server of tests/engines/engines.py over each protocol."""


@dataclass
class Loaded:
    target: str
    sf: SciFact
    query_ids: list[str]
    doc_ids: list[str]
    docs: dict[str, dict[str, Any]]
    encoder: LexicalSparseEncoder
    connection: dict[str, Any]
    """The store's connection section (local path, or server URL, key and protocol)."""
    collections: tuple[str, str]
    """(named vectors collection, unnamed default vector collection)."""
    where: str
    """The path or URL, which no error message may show."""


@dataclass(frozen=True)
class Corpus:
    sf: SciFact
    query_ids: list[str]
    doc_ids: list[str]
    docs: dict[str, dict[str, Any]]


@pytest.fixture(scope="session")
def corpus(scifact_dir: Path) -> Corpus:
    sf = load_scifact(scifact_dir)
    qids, dids = subset(sf, n_queries=100, n_others=1000)
    return Corpus(sf, qids, dids, {str(d["id"]): d for d in documents(sf, dids)})


SERVER_COLLECTIONS = ("a2m-test-scifact", "a2m-test-scifact-unnamed")


@pytest.fixture(scope="session")
def server_encoder(corpus: Corpus, request: pytest.FixtureRequest) -> LexicalSparseEncoder:
    """The subset loaded once per session into the server (both protocols read it)."""
    server: QdrantServer = request.getfixturevalue("qdrant_server")
    client = {
        "url": server.url,
        "api_key": server.api_key,
        "timeout": 60,
        "check_compatibility": False,
    }
    named, unnamed = SERVER_COLLECTIONS
    sf, dids = corpus.sf, corpus.doc_ids
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
        encoder = load_qdrant("", sf, dids, collection=named, server=client)
        load_qdrant("", sf, dids[:200], collection=unnamed, dense_name=None, server=client)
    return encoder


@pytest.fixture(scope="session", params=TARGETS)
def loaded(
    corpus: Corpus, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Loaded:
    target: str = request.param
    sf, dids = corpus.sf, corpus.doc_ids
    if target == "local":
        base = tmp_path_factory.mktemp("qdrant")
        encoder = load_qdrant(base / "named", sf, dids)
        load_qdrant(base / "unnamed", sf, dids[:200], dense_name=None)
        # In process: one path per collection, both named "scifact".
        return Loaded(
            target,
            sf,
            corpus.query_ids,
            dids,
            corpus.docs,
            encoder,
            {"path": str(base / "named")},
            ("scifact", "scifact"),
            str(base),
        )
    server: QdrantServer = request.getfixturevalue("qdrant_server")
    encoder = request.getfixturevalue("server_encoder")
    connection = server_connection(server, grpc=target == "grpc")
    return Loaded(
        target,
        sf,
        corpus.query_ids,
        dids,
        corpus.docs,
        encoder,
        connection,
        SERVER_COLLECTIONS,
        server.url,
    )


def server_connection(server: QdrantServer, *, grpc: bool, **over: Any) -> dict[str, Any]:
    """A store's connection section for the test server (REST, or gRPC on its port)."""
    conn: dict[str, Any] = {"url": server.url, "api_key": server.api_key}
    if grpc:
        conn.update(prefer_grpc=True, grpc_port=server.grpc_port)
    return {**conn, **over}


def store(loaded: Loaded, *, unnamed: bool = False, **over: Any) -> ConnectorSpec[Any]:
    """The test store: hybrid over the loaded collection; keyword overrides per section."""
    connection = dict(loaded.connection, retries=1)
    if unnamed and loaded.target == "local":
        connection["path"] = str(Path(connection["path"]).with_name("unnamed"))
    raw: dict[str, Any] = {
        "backend": "qdrant",
        "index": loaded.collections[1 if unnamed else 0],
        "connection": connection,
        "mapping": {
            "content": "content",
            "key": "key",
            "group": "group",
            "created_at": "created_at",
            "metadata": ["title", "year", "judged"],
        },
        "search": {
            "mode": "hybrid",
            "vector_field": "dense",
            "sparse_vector": "text-sparse",
            "embedder": {"kind": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"},
        },
    }
    return spec_of(merged(raw, over))


@pytest.fixture
async def conn(loaded: Loaded) -> AsyncIterator[QdrantConnector]:
    c = QdrantConnector(store(loaded))
    await c.open()
    try:
        yield c
    finally:
        await c.close()


def _request(loaded: Loaded, qid: str, mode: str, **kw: Any) -> SearchRequest:
    text = loaded.sf.queries[qid]
    return SearchRequest(
        limit=kw.pop("limit", 10),
        sparse=loaded.encoder.encode_query(text) if mode in ("sparse", "hybrid") else None,
        dense=loaded.sf.query_vector(qid) if mode in ("dense", "hybrid") else None,
        **kw,
    )


# -- open / describe ---------------------------------------------------------------------


async def test_open_reports_dense_vector_and_lexical(loaded: Loaded) -> None:
    c = QdrantConnector(store(loaded))
    assert isinstance(c, Connector)
    info = await c.open()
    try:
        assert info.engine.startswith(ENGINE[loaded.target])
        assert info.vectors is not None
        assert info.vectors.dimensions == 384
        assert info.vectors.metric == "cosine"
        assert info.vectors.metrics == ("cosine", "dot", "l2")
        assert info.lexical is True
        assert await c.ping() is True
    finally:
        await c.close()
    assert await c.ping() is False


async def test_unnamed_default_vector(loaded: Loaded) -> None:
    c = QdrantConnector(store(loaded, unnamed=True, search={"vector_field": None}))
    info = await c.open()
    try:
        assert info.engine.startswith(ENGINE[loaded.target])
        assert info.vectors is not None
        assert info.vectors.dimensions == 384
        qid = loaded.query_ids[0]
        hits = await c.search(_request(loaded, qid, "dense", with_vectors=True))
        assert hits
        assert all(h.vector is not None and len(h.vector) == 384 for h in hits)
        stored = loaded.sf.doc_vector(hits[0].id)
        assert hits[0].vector == pytest.approx(stored, abs=1e-6)
    finally:
        await c.close()


async def test_lexical_store_without_dense_vector_reports_none(loaded: Loaded) -> None:
    c = QdrantConnector(store(loaded, search={"mode": "lexical", "vector_field": None}))
    info = await c.open()
    try:
        # The collection's dense vector is named, and a lexical store names none.
        assert info.vectors is None
        assert info.lexical is True
    finally:
        await c.close()


@pytest.mark.parametrize(
    ("over", "names"),
    [
        ({"index": "no-such-collection"}, "index"),
        ({"search": {"vector_field": "nope"}}, "search.vector_field"),
        ({"search": {"sparse_vector": "nope"}}, "search.sparse_vector"),
        ({"search": {"vector_field": None}}, "search.vector_field"),
    ],
)
async def test_missing_collection_or_vector_is_a_config_error(
    loaded: Loaded, over: dict[str, Any], names: str
) -> None:
    c = QdrantConnector(store(loaded, **over))
    with pytest.raises(EngineConfigError, match=names.replace(".", r"\.")) as err:
        await c.open()
    assert loaded.where not in str(err.value)
    # A failed open released the shard's lock: the path opens again at once.
    ok = QdrantConnector(store(loaded))
    await ok.open()
    await ok.close()


async def test_in_memory_location_without_collection_is_a_config_error() -> None:
    c = QdrantConnector(
        spec_of(
            {
                "backend": "qdrant",
                "index": "absent",
                "connection": {"location": ":memory:"},
                "mapping": {"content": "content"},
                "search": {"sparse_vector": "s"},
            }
        )
    )
    with pytest.raises(EngineConfigError):
        await c.open()


async def test_reads_on_a_closed_connector_are_unavailable(loaded: Loaded) -> None:
    c = QdrantConnector(store(loaded))
    await c.open()
    await c.close()
    with pytest.raises(EngineUnavailable):
        await c.ordered(OrderedRequest(limit=1))


# -- ranking quality ---------------------------------------------------------------------


@pytest.fixture(scope="session")
async def hit_rates(loaded: Loaded) -> dict[str, float]:
    """hit@10 (a relevant document among the first 10) per mode over the 100 queries."""
    c = QdrantConnector(store(loaded))
    await c.open()
    try:
        rates = {}
        for mode in ("dense", "sparse", "hybrid"):
            found = 0
            for qid in loaded.query_ids:
                hits = await c.search(_request(loaded, qid, mode))
                found += bool({h.id for h in hits} & loaded.sf.qrels[qid])
            rates[mode] = found / len(loaded.query_ids)
        return rates
    finally:
        await c.close()


@pytest.mark.parametrize("mode", ["dense", "sparse"])
def test_each_leg_finds_relevant_documents(hit_rates: dict[str, float], mode: str) -> None:
    assert hit_rates[mode] >= MIN_HIT_AT_10[mode], hit_rates


def test_hybrid_is_at_least_as_good_as_the_worse_leg(hit_rates: dict[str, float]) -> None:
    assert hit_rates["hybrid"] >= min(hit_rates["dense"], hit_rates["sparse"]), hit_rates


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
async def test_scores_are_normalised_and_descending(
    loaded: Loaded, conn: QdrantConnector, mode: str
) -> None:
    for qid in loaded.query_ids[:10]:
        hits = await conn.search(_request(loaded, qid, mode, limit=20))
        assert len(hits) == 20
        scores = [h.score for h in hits]
        assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
        if mode != "dense":
            assert scores[0] == pytest.approx(1.0)


async def test_payload_is_limited_to_mapped_fields(loaded: Loaded, conn: QdrantConnector) -> None:
    hits = await conn.search(_request(loaded, loaded.query_ids[0], "dense", limit=3))
    assert len(hits) == 3
    mapped = {"content", "key", "group", "created_at", "title", "year", "judged"}
    for h in hits:
        assert set(h.source) <= mapped
        assert h.source["key"] == f"scifact/{h.id}"
        assert h.vector is None


async def test_zero_weight_drops_a_leg(loaded: Loaded, conn: QdrantConnector) -> None:
    qid = loaded.query_ids[1]
    dense = await conn.search(_request(loaded, qid, "dense"))
    fused = await conn.search(_request(loaded, qid, "hybrid", lexical_weight=0.0))
    assert [h.id for h in fused] == [h.id for h in dense]


async def test_empty_sparse_query_finds_nothing(conn: QdrantConnector) -> None:
    assert await conn.search(SearchRequest(limit=5, sparse=SparseVector((), ()))) == []


async def test_query_text_is_encoded_by_the_connector(
    loaded: Loaded, conn: QdrantConnector
) -> None:
    text = loaded.sf.queries[loaded.query_ids[2]]
    by_text = await conn.search(SearchRequest(limit=10, text=text))
    by_vector = await conn.search(SearchRequest(limit=10, sparse=loaded.encoder.encode_query(text)))
    assert by_text, "a real query finds documents"
    assert [(h.id, h.score) for h in by_text] == [(h.id, h.score) for h in by_vector]
    assert await conn.search(SearchRequest(limit=5, text="the of and")) == []


async def test_a_long_query_text_is_encoded_off_the_event_loop(
    loaded: Loaded, conn: QdrantConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = conn._encoder
    assert encoder is not None
    threads: list[int] = []
    encode = encoder.encode_query

    def recording(text: str) -> SparseVector:
        threads.append(threading.get_ident())
        return encode(text)

    monkeypatch.setattr(encoder, "encode_query", recording)
    short = loaded.sf.queries[loaded.query_ids[3]]
    long = (short + " ") * (ENCODE_INLINE_CHARS // len(short) + 2)
    assert len(short) <= ENCODE_INLINE_CHARS < len(long)
    await conn.search(SearchRequest(limit=5, text=short))
    hits = await conn.search(SearchRequest(limit=5, text=long))
    loop_thread = threading.get_ident()
    assert threads[0] == loop_thread  # short: inline, a thread hop would cost more
    assert threads[1] != loop_thread  # long: on a worker thread
    assert hits, "the long query still ranks"


async def test_text_without_a_sparse_vector_is_rejected(loaded: Loaded) -> None:
    c = QdrantConnector(store(loaded, search={"mode": "dense", "sparse_vector": None}))
    await c.open()
    try:
        with pytest.raises(EngineRejected, match="no sparse vector"):
            await c.search(SearchRequest(limit=5, text="vitamin d"))
    finally:
        await c.close()


async def test_with_vectors_returns_the_stored_dense_vector(
    loaded: Loaded, conn: QdrantConnector
) -> None:
    hits = await conn.search(_request(loaded, loaded.query_ids[2], "hybrid", with_vectors=True))
    assert hits
    for h in hits:
        assert h.vector is not None
        assert len(h.vector) == 384
        assert h.vector == pytest.approx(loaded.sf.doc_vector(h.id), abs=1e-6)
    rows = await conn.ordered(OrderedRequest(limit=2, with_vectors=True))
    assert len(rows) == 2
    assert all(r.vector is not None and len(r.vector) == 384 for r in rows)


# -- filters -----------------------------------------------------------------------------


def _expected(loaded: Loaded, pred: Any) -> set[str]:
    return {d for d, doc in loaded.docs.items() if pred(doc)}


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
async def test_equality_filter(loaded: Loaded, conn: QdrantConnector, mode: str) -> None:
    flt = Filter(must=(Condition("group", ("g3",)),))
    hits = await conn.search(_request(loaded, loaded.query_ids[3], mode, limit=30, filter=flt))
    assert hits
    assert {h.source["group"] for h in hits} == {"g3"}


async def test_any_of_int_bool_and_float_filters(loaded: Loaded, conn: QdrantConnector) -> None:
    qid = loaded.query_ids[4]
    cases: list[tuple[Condition, Any]] = [
        (Condition("group", ("g1", "g2")), lambda d: d["group"] in ("g1", "g2")),
        (Condition("year", (2003, 2011)), lambda d: d["year"] in (2003, 2011)),
        (Condition("year", (2005.0,)), lambda d: d["year"] == 2005),
        (Condition("year", (2004, "g1", 2019.0)), lambda d: d["year"] in (2004, 2019)),
        (Condition("judged", (True,)), lambda d: d["judged"]),
    ]
    for cond, pred in cases:
        flt = Filter(must=(cond,))
        hits = await conn.search(_request(loaded, qid, "dense", limit=50, filter=flt))
        assert hits, cond
        assert all(pred(loaded.docs[h.id]) for h in hits), cond
        rows = await conn.ordered(OrderedRequest(limit=5000, filter=flt))
        assert {r.id for r in rows} == _expected(loaded, pred), cond


@pytest.mark.parametrize("value", [True, False])
async def test_a_boolean_condition_is_exact_on_every_read(
    loaded: Loaded, conn: QdrantConnector, value: bool
) -> None:
    """Alone and nested in a should (an any-of of mixed types), on every ranked mode,
    both fusions, ordered reads both ways and fetch: exactly the points holding it, and
    ``limit`` of them when that many match."""
    expected = _expected(loaded, lambda d: d["judged"] is value)
    assert 20 <= len(expected) < len(loaded.docs)  # the control: the other value exists
    qid = loaded.query_ids[6]
    for cond in (Condition("judged", (value,)), Condition("judged", (value, "no", 7))):
        flt = Filter(must=(cond,))
        for mode, fusion in (
            ("dense", "rrf"),
            ("sparse", "rrf"),
            ("hybrid", "rrf"),
            ("hybrid", "zscore"),
        ):
            req = _request(loaded, qid, mode, limit=20, filter=flt, fusion=fusion)
            hits = await conn.search(req)
            assert len(hits) == 20, (cond, mode, fusion)
            assert {h.id for h in hits} <= expected, (cond, mode, fusion)
        rows = await conn.ordered(OrderedRequest(limit=5000, newest_first=False, filter=flt))
        assert {r.id for r in rows} == expected, cond
        newest = await conn.ordered(OrderedRequest(limit=7, newest_first=True, filter=flt))
        assert [r.id for r in newest] == [r.id for r in rows][::-1][:7], cond
        first = await conn.fetch(flt)
        assert first is not None, cond
        assert first.id == min(expected, key=int), cond
    # With a key prefix too (resolved into ids for the search).
    prefix = loaded.docs[min(expected, key=int)]["key"]
    in_prefix = {d for d in expected if loaded.docs[d]["key"].startswith(prefix)}
    scoped = Filter(must=(Condition("judged", (value,)),), key_prefix=("key", prefix))
    rows = await conn.ordered(OrderedRequest(limit=50, filter=scoped))
    assert {r.id for r in rows} == in_prefix
    hits = await conn.search(_request(loaded, qid, "hybrid", limit=50, filter=scoped))
    assert {h.id for h in hits} == in_prefix


async def test_must_not_leaves_out_exactly_its_values(
    loaded: Loaded, conn: QdrantConnector
) -> None:
    left_out = Filter(must_not=(Condition("group", ("g1", "g3")), Condition("year", (2004,))))
    expected = _expected(loaded, lambda d: d["group"] not in ("g1", "g3") and d["year"] != 2004)
    assert 0 < len(expected) < len(loaded.docs)  # the control: it leaves some out, not all
    rows = await conn.ordered(OrderedRequest(limit=5000, filter=left_out))
    assert {r.id for r in rows} == expected
    for mode in ("dense", "sparse", "hybrid"):
        req = _request(loaded, loaded.query_ids[3], mode, limit=40, filter=left_out)
        hits = await conn.search(req)
        assert len(hits) == 40, mode
        assert {h.id for h in hits} <= expected, mode
    # Nothing a point can hold (not an id, no value) leaves nothing out.
    none_out = Filter(must_not=(Condition(ID_FIELD, ("not-an-id",)), Condition("group", ())))
    rows = await conn.ordered(OrderedRequest(limit=5000, filter=none_out))
    assert {r.id for r in rows} == set(loaded.docs)


def test_must_not_is_a_nested_must_not_for_a_qdrant_server() -> None:
    from qdrant_client.http import models

    from connectors.qdrant.server_models import server_filter

    flt = Filter(
        must=(Condition("group", ("g1",)),),
        must_not=(
            Condition("group", ("a", "b")),
            Condition("year", (2004,)),
            Condition("content", ("x",), phrase=True),  # not exact: never left out
        ),
    )
    qfilter = translate_filter(flt).qfilter
    assert qfilter == AllOf(
        (Match("group", "g1"), NoneOf((MatchAnyOf("group", ("a", "b")), Match("year", 2004))))
    )
    assert server_filter(qfilter) == models.Filter(
        must=[
            models.FieldCondition(key="group", match=models.MatchValue(value="g1")),
            models.Filter(
                must_not=[
                    models.FieldCondition(key="group", match=models.MatchAny(any=["a", "b"])),
                    models.FieldCondition(key="year", match=models.MatchValue(value=2004)),
                ]
            ),
        ]
    )


async def test_id_filter(loaded: Loaded, conn: QdrantConnector) -> None:
    a, b = loaded.doc_ids[0], loaded.doc_ids[5]
    flt = Filter(must=(Condition(ID_FIELD, (a, int(b), "not-an-id", -1, 2.5, "999999999")),))
    rows = await conn.ordered(OrderedRequest(limit=10, filter=flt))
    assert {r.id for r in rows} == {a, b}
    hits = await conn.search(_request(loaded, loaded.query_ids[0], "hybrid", filter=flt))
    assert {h.id for h in hits} <= {a, b}
    nothing = Filter(must=(Condition(ID_FIELD, ("not-an-id",)),))
    assert await conn.ordered(OrderedRequest(limit=10, filter=nothing)) == []
    assert await conn.search(_request(loaded, loaded.query_ids[0], "dense", filter=nothing)) == []
    assert await conn.fetch(nothing) is None
    uuid_only = Filter(must=(Condition(ID_FIELD, ("6f1c2b8e-0d55-4c3a-9a51-0c7e2b7d9f10",)),))
    assert await conn.ordered(OrderedRequest(limit=10, filter=uuid_only)) == []


async def test_unknown_field_matches_nothing(loaded: Loaded, conn: QdrantConnector) -> None:
    flt = Filter(must=(Condition("no_such_field", ("x", 1)),))
    assert await conn.search(_request(loaded, loaded.query_ids[0], "hybrid", filter=flt)) == []
    assert await conn.ordered(OrderedRequest(limit=10, filter=flt)) == []
    assert await conn.fetch(flt) is None


@pytest.mark.parametrize("prefix", ["scifact/4", "scifact/12", "scifact/", "scifact/4983"])
async def test_key_prefix_is_exact(loaded: Loaded, conn: QdrantConnector, prefix: str) -> None:
    flt = Filter(key_prefix=("key", prefix))
    expected = _expected(loaded, lambda d: d["key"].startswith(prefix))
    assert expected
    # Ordered reads page on until limit exact matches, in both directions.
    by_time = sorted(expected, key=lambda d: loaded.docs[d]["created_at"])
    for newest_first in (False, True):
        rows = await conn.ordered(OrderedRequest(limit=7, filter=flt, newest_first=newest_first))
        want = by_time[-7:][::-1] if newest_first else by_time[:7]
        assert [r.id for r in rows] == want
    # Search over-fetches up to `candidates`; every hit carries the prefix.
    hits = await conn.search(_request(loaded, loaded.query_ids[0], "hybrid", filter=flt))
    assert hits
    assert all(h.source["key"].startswith(prefix) for h in hits)
    assert len(hits) == min(10, len(expected))


async def test_key_prefix_combines_with_conditions(loaded: Loaded, conn: QdrantConnector) -> None:
    flt = Filter(must=(Condition("group", ("g2",)),), key_prefix=("key", "scifact/1"))
    pred = lambda d: d["group"] == "g2" and d["key"].startswith("scifact/1")  # noqa: E731
    rows = await conn.ordered(OrderedRequest(limit=5000, filter=flt))
    assert {r.id for r in rows} == _expected(loaded, pred)


def test_prefix_words_keep_only_whole_tokens() -> None:
    assert prefix_words("scifact/12") == ["scifact"]
    assert prefix_words("demo/recall/") == ["demo", "recall"]
    assert prefix_words("Demo Notes/x") == ["demo", "notes"]
    assert prefix_words("v1.2/x") == []  # Unicode keeps "v1.2" one word
    assert prefix_words("a_b/c") == []
    assert prefix_words("abc") == []
    assert translate_filter(Filter(key_prefix=("key", "abc"))).qfilter is None


# -- ordered / fetch -----------------------------------------------------------------------


async def test_ordered_by_created_at(loaded: Loaded, conn: QdrantConnector) -> None:
    by_time = sorted(loaded.docs, key=lambda d: loaded.docs[d]["created_at"])
    oldest = await conn.ordered(OrderedRequest(limit=25, newest_first=False))
    assert [r.id for r in oldest] == by_time[:25]
    newest = await conn.ordered(OrderedRequest(limit=25, newest_first=True))
    assert [r.id for r in newest] == by_time[-25:][::-1]
    assert all(r.score is None for r in newest)
    # ISO-8601 strings are ordered as datetimes (the datetime payload index parses them).
    stamps = [r.source["created_at"] for r in oldest]
    assert stamps == sorted(stamps)


async def test_ordered_with_filter(loaded: Loaded, conn: QdrantConnector) -> None:
    flt = Filter(must=(Condition("group", ("g5",)),))
    want = sorted(
        _expected(loaded, lambda d: d["group"] == "g5"),
        key=lambda d: loaded.docs[d]["created_at"],
    )
    rows = await conn.ordered(OrderedRequest(limit=10, filter=flt))
    assert [r.id for r in rows] == want[-10:][::-1]


async def test_ordered_without_created_at_falls_back_to_id_order(loaded: Loaded) -> None:
    c = QdrantConnector(store(loaded, mapping={"created_at": None}))
    await c.open()
    try:
        by_id = sorted(loaded.docs, key=int)
        first = await c.ordered(OrderedRequest(limit=30, newest_first=False))
        assert [r.id for r in first] == by_id[:30]
        last = await c.ordered(OrderedRequest(limit=30, newest_first=True))
        assert [r.id for r in last] == by_id[-30:][::-1]
        flt = Filter(key_prefix=("key", "scifact/2"))
        want = [d for d in by_id if loaded.docs[d]["key"].startswith("scifact/2")]
        tail = await c.ordered(OrderedRequest(limit=4, filter=flt, newest_first=True))
        assert [r.id for r in tail] == want[-4:][::-1]
        head = await c.ordered(OrderedRequest(limit=4, filter=flt, newest_first=False))
        assert [r.id for r in head] == want[:4]
    finally:
        await c.close()


async def test_fetch_by_key(loaded: Loaded, conn: QdrantConnector) -> None:
    doc_id = loaded.doc_ids[10]
    hit = await conn.fetch(Filter(must=(Condition("key", (f"scifact/{doc_id}",)),)))
    assert hit is not None
    assert hit.id == doc_id
    assert hit.score is None
    assert hit.vector is None
    assert hit.source["content"] == loaded.docs[doc_id]["content"]
    with_vec = await conn.fetch(Filter(must=(Condition("key", (f"scifact/{doc_id}",)),)), True)
    assert with_vec is not None
    assert with_vec.vector is not None
    assert len(with_vec.vector) == 384
    assert await conn.fetch(Filter(must=(Condition("key", ("scifact/none",)),))) is None
    # A prefix fetch skips the points whose key only shares the prefix's words.
    by_id = sorted(loaded.docs, key=int)
    first = next(d for d in by_id if loaded.docs[d]["key"].startswith("scifact/9"))
    hit = await conn.fetch(Filter(key_prefix=("key", "scifact/9")))
    assert hit is not None
    assert hit.id == first


# -- an unreachable or failing server ------------------------------------------------------


def _server_store(url: str, **conn: Any) -> ConnectorSpec[Any]:
    return spec_of(
        {
            "backend": "qdrant",
            "index": "scifact",
            "connection": {"url": url, **conn},
            "mapping": {"content": "content"},
            "search": {"sparse_vector": "s"},
        }
    )


async def test_unreachable_server_is_unavailable_after_bounded_retries() -> None:
    c = QdrantConnector(_server_store("http://127.0.0.1:1", retries=2, timeout_ms=2000))
    started = time.monotonic()
    with pytest.raises(EngineUnavailable) as err:
        await c.open()
    assert time.monotonic() - started < 5
    assert "127.0.0.1" not in str(err.value)
    assert await c.ping() is False


async def test_unreachable_server_within_a_deadline() -> None:
    c = QdrantConnector(_server_store("http://127.0.0.1:1", retries=10))
    started = time.monotonic()
    with pytest.raises((EngineUnavailable, EngineTimeout)):
        async with deadline_scope(0.5):
            await c.open()
    assert time.monotonic() - started < 3


def _qdrant_peer(
    start: StartPeer,
    status: int,
    headers: dict[str, str] | None = None,
    hang: bool = False,
) -> HttpPeer:
    """A Qdrant server that answers every request with one status (or not at all)."""
    reply = PeerReply.json({"status": {"error": "nope"}, "time": 0}, status, headers)
    return start(lambda request: PeerReply(hang=True) if hang else reply)


async def test_server_503_is_unavailable_with_retry_after(
    http_peer: StartPeer,
) -> None:
    peer = _qdrant_peer(http_peer, 503, {"Retry-After": "7"})
    c = QdrantConnector(_server_store(peer.url, retries=2))
    with pytest.raises(EngineUnavailable) as err:
        await c.open()
    assert err.value.retry_after_ms == 7000
    assert len(peer.requests) == 3  # one try and two retries
    assert peer.url not in str(err.value)


async def test_server_429_with_retry_after_is_unavailable(
    http_peer: StartPeer,
) -> None:
    peer = _qdrant_peer(http_peer, 429, {"Retry-After": "2"})
    c = QdrantConnector(_server_store(peer.url, retries=1))
    with pytest.raises(EngineUnavailable) as err:
        await c.open()
    assert err.value.retry_after_ms == 2000
    assert len(peer.requests) == 2


@pytest.mark.parametrize(("status", "exc"), [(404, EngineConfigError), (401, EngineConfigError)])
async def test_server_4xx_is_not_retried(
    http_peer: StartPeer, status: int, exc: type[Exception]
) -> None:
    peer = _qdrant_peer(http_peer, status)
    c = QdrantConnector(_server_store(peer.url, retries=3))
    with pytest.raises(exc):
        await c.open()
    assert len(peer.requests) == 1


async def test_server_that_does_not_answer_times_out(
    http_peer: StartPeer,
) -> None:
    peer = _qdrant_peer(http_peer, 200, hang=True)
    c = QdrantConnector(_server_store(peer.url, retries=3, timeout_ms=300))
    started = time.monotonic()
    with pytest.raises(EngineTimeout):
        await c.open()
    assert time.monotonic() - started < 3
    assert len(peer.requests) == 1  # a timeout is not retried: the deadline is the caller's


async def test_broad_key_prefix_falls_back_to_over_fetching(
    loaded: Loaded, conn: QdrantConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    import connectors.qdrant.reader as qdrant_module

    monkeypatch.setattr(qdrant_module, "_PREFIX_IDS", 5)
    flt = Filter(key_prefix=("key", "scifact/1"))
    hits = await conn.search(_request(loaded, loaded.query_ids[0], "hybrid", filter=flt))
    assert 0 < len(hits) <= 10
    assert all(h.source["key"].startswith("scifact/1") for h in hits)


# -- the sparse vector must be the gateway's lexical encoding ------------------------------


@pytest.mark.parametrize("modifier", [None, "idf"])
async def test_a_sparse_vector_without_the_idf_modifier_is_refused_at_open(
    modifier: str | None,
) -> None:
    import qdrant_edge as qe

    c = QdrantConnector(
        spec_of(
            {
                "backend": "qdrant",
                "index": "a2m-test-sparse-modifier",
                "connection": {"location": ":memory:"},
                "mapping": {"content": "content"},
                "search": {"sparse_vector": "text"},
            }
        )
    )
    params = qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf if modifier == "idf" else None)
    qe.EdgeShard.create(
        c.local_shard_path(), qe.EdgeConfig(sparse_vectors={"text": params})
    ).close()
    try:
        if modifier == "idf":  # control: the gateway's own encoding opens
            info = await c.open()
            assert info.lexical
        else:
            with pytest.raises(EngineConfigError, match=r"search\.sparse_vector.*modifier idf"):
                await c.open()
    finally:
        await c.close()


@pytest.mark.parametrize("fusion", ["zscore", "minmax", "dbsf"])
async def test_score_fusion_fuses_the_two_legs_in_the_gateway(
    loaded: Loaded, conn: QdrantConnector, fusion: Fusion
) -> None:
    qid = loaded.query_ids[3]
    depth = 30
    sparse = await conn.search(_request(loaded, qid, "sparse", limit=depth))
    dense = await conn.search(_request(loaded, qid, "dense", limit=depth))
    expected = fuse([(sparse, 1.0), (dense, 1.0)], fusion=fusion, k=60, limit=10)
    hits = await conn.search(_request(loaded, qid, "hybrid", candidates=depth, fusion=fusion))
    assert [h.id for h in hits] == [h.id for h in expected]
    assert [h.score for h in hits] == pytest.approx([h.score for h in expected])
    assert all(0.0 <= (h.score or 0.0) <= 1.0 for h in hits)
