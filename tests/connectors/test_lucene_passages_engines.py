"""Passages by the engine's highlighter, against real Elasticsearch 9 and OpenSearch 3.

The nodes (``A2M_TEST_ELASTICSEARCH9_URL``, ``A2M_TEST_OPENSEARCH3_URL``) hold the whole
SciFact corpus with its vectors. In every mode, a record longer than the cap comes back
as its passages, within the cap, at offsets that slice the document ``memory/fetch``
returns; a hit the kNN leg alone found gets passages too; and a scoped caller still
sees only its own documents.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.factory import make_connector
from connectors.lucene.passages import ANALYSED_CHARS
from gateway.a2m.params import FetchParams, RecallParams
from gateway.config import validate_store
from gateway.security.scopes import Caller, Principal
from gateway.store.connector_spec import connector_spec
from gateway.store.store import Store
from tests.conftest import lucene_node
from tests.support import lucene_loader
from tests.support.scifact import SciFact
from tests.support.stores import started

pytestmark = pytest.mark.integration

INDEX = "a2m-test-scifact"
CAP = 300
PASSAGES = {"max_chars": CAP, "count": 2}
ACL = {"filters": [{"field": "acl", "claims": ["groups"]}]}


@pytest.fixture(scope="module", params=["elasticsearch9", "opensearch3"])
def node(request: pytest.FixtureRequest, scifact: SciFact) -> tuple[str, str]:
    """(backend, URL) of a node holding SciFact."""
    backend, url = lucene_node(request.param)
    lucene_loader.load_index(backend, url, INDEX, scifact)  # type: ignore[arg-type]
    return backend, url


def _store(node: tuple[str, str], mode: str, **extra: Any) -> Store:
    """A store on the SciFact index; a dense or hybrid one names the model its vectors come
    from (recalls here send the query's vector beside its text, so it embeds nothing)."""
    backend, url = node
    if mode != "lexical":
        extra.setdefault("search", {})["embedder"] = {"kind": "minilm"}
    config = validate_store(
        {
            "backend": backend,
            "index": INDEX,
            "connection": {"hosts": [url], "timeout_ms": 30_000},
            "mapping": {"id": "doc_id", "content": "text", "key": "key", "metadata": ["acl"]},
            "search": {
                "mode": mode,
                "text_fields": ["title", "text"],
                "vector_field": "embedding",
                **extra.pop("search", {}),
            },
            **extra,
        }
    )
    return Store("s", config, make_connector(connector_spec(config)))


def _queries(scifact: SciFact) -> list[tuple[str, list[float]]]:
    qids = [q for q in scifact.query_ids if q in scifact.qrels][:3]
    return [(scifact.queries[q], scifact.query_vector(q)) for q in qids]


@pytest.mark.parametrize("mode", ["lexical", "dense", "hybrid"])
async def test_engine_passages_slice_the_document_fetch_returns(
    node: tuple[str, str], scifact: SciFact, mode: str
) -> None:
    store = _store(node, mode, search={"passages": PASSAGES})
    whole = _store(node, mode)
    async with started(store, whole):
        assert {"stage": "passages", "by": "engine", "max_chars": CAP, "count": 2} in (
            store.describe()["search"]["stages"]
        )
        cut = 0
        for text, vector in _queries(scifact):
            params = RecallParams(query=text, embedding=vector, limit=8)
            records = (await store.recall(params))["records"]
            plain = (await whole.recall(params))["records"]
            assert [r["id"] for r in records] == [r["id"] for r in plain]
            for record, full in zip(records, plain, strict=True):
                assert len(record["content"]) <= CAP
                if len(full["content"]) <= CAP:
                    assert record["content"] == full["content"]
                    continue
                cut += 1
                where = record["metadata"]["passage"]
                fetched = (await store.fetch(FetchParams(key=record["key"])))["record"]
                document = fetched["content"]
                assert document == full["content"]
                assert where["length"] == len(document)
                pieces = [document[start:end] for start, end in where["offsets"]]
                assert record["content"] == " … ".join(pieces)
                assert "passage" not in fetched.get("metadata", {})
        assert cut  # SciFact abstracts are mostly longer than the cap


async def test_a_hit_only_the_knn_leg_found_gets_passages_with_a_query_term(
    node: tuple[str, str], scifact: SciFact
) -> None:
    # Dense mode: no lexical leg selects the hits; the highlighter still scores their
    # sentences against the query text (highlight_query), so where a hit holds a query
    # term its passage does.
    store = _store(node, "dense", search={"passages": PASSAGES})
    async with started(store):
        with_term: list[dict[str, Any]] = []
        for text, vector in _queries(scifact):
            words = {w.lower().strip(".,()") for w in text.split() if len(w) > 5}
            params = RecallParams(query=text, embedding=vector, limit=8)
            records = (await store.recall(params))["records"]
            # Every record longer than the cap is cut (a hit without a query term: its head).
            assert all(len(r["content"]) <= CAP for r in records)
            assert any("passage" in r.get("metadata", {}) for r in records)
            with_term += [
                r
                for r in records
                if "passage" in r.get("metadata", {})
                and words & {w.lower().strip(".,()") for w in r["content"].split()}
            ]
        # Not only heads: the query's terms chose passages inside the documents.
        assert any(r["metadata"]["passage"]["offsets"][0][0] > 0 for r in with_term)


async def test_a_scoped_caller_sees_passages_of_its_own_documents_only(
    node: tuple[str, str], scifact: SciFact
) -> None:
    scoped = _store(node, "hybrid", search={"passages": PASSAGES}, scope=ACL)
    free = _store(node, "hybrid", search={"passages": PASSAGES})
    even = Caller(principal=Principal("alice", {"sub": "alice", "groups": ["even"]}, "embedded"))
    async with started(scoped, free):
        for text, vector in _queries(scifact):
            params = RecallParams(query=text, embedding=vector, limit=10)
            mine = (await scoped.recall(params, even))["records"]
            everyone = (await free.recall(params))["records"]
            assert mine
            assert {r["metadata"]["acl"] for r in mine} == {"even"}
            assert any("passage" in r["metadata"] for r in mine)
            # Not vacuous: unscoped, the same query reaches the other group's documents.
            assert "odd" in {r["metadata"]["acl"] for r in everyone}


def _index(
    backend: str,
    url: str,
    index: str,
    docs: dict[str, str],
    settings: dict[str, Any] | None = None,
    text: dict[str, Any] | None = None,
) -> None:
    """A fresh ``index`` (``settings``) holding each of ``docs`` as ``{key, text, title}``
    (``text`` mapped as given, else ``text``; the title is the text's first four words)."""
    client = lucene_loader.lucene_client(backend, url)
    try:
        properties = {
            "key": {"type": "keyword"},
            "title": {"type": "text"},
            "text": text or {"type": "text"},
        }
        body = {"settings": settings or {}, "mappings": {"properties": properties}}
        lucene_loader.recreate_index(client, index, body)
        for key, content in docs.items():
            title = " ".join(content.split()[:4])
            client.index(index=index, id=key, body={"key": key, "text": content, "title": title})
        client.indices.refresh(index=index)
    finally:
        client.close()


def _index_store(backend: str, url: str, index: str, text_field: str, **search: Any) -> Store:
    """A lexical store on an index of :func:`_index`, searching ``text_field``."""
    config = validate_store(
        {
            "backend": backend,
            "index": index,
            "connection": {"hosts": [url], "timeout_ms": 30_000},
            "mapping": {"content": "text", "key": "key"},
            "search": {"mode": "lexical", "text_fields": [text_field], **search},
        }
    )
    return Store("s", config, make_connector(connector_spec(config)))


def _refused(backend: str, url: str, index: str, body: dict[str, Any], says: str) -> None:
    """The engine refuses the ``_search`` ``body`` on ``index``, saying ``says``."""
    client = lucene_loader.lucene_client(backend, url)
    try:
        with pytest.raises(Exception, match=says):
            client.search(index=index, body=body)
    finally:
        client.close()


FILLER = "Filler words without the asked term go on here. "
"""A sentence without the query's terms."""


def _long_and_small(fillers: int) -> dict[str, str]:
    """A long document whose head and tail hold "bone density", ``fillers`` filler
    sentences between them, and a small one holding it too (by key)."""
    return {
        "long": "Bone density falls in winter. " + FILLER * fillers + "Bone density tail.",
        "small": "Bone density is measured by scans. " + "Other words follow. " * 30,
    }


async def test_a_document_longer_than_the_highlighters_bound_still_recalls(
    node: tuple[str, str],
) -> None:
    # Past index.highlight.max_analyzed_offset (1,000,000 characters by default) an
    # unbounded highlight fails the whole search; bounded, the head is highlighted.
    backend, url = node
    index = "a2m-test-passages-huge"
    docs = _long_and_small(22_000)
    _index(backend, url, index, docs)
    assert len(docs["long"]) > 1_000_000
    store = _index_store(backend, url, index, "text", passages=PASSAGES)
    async with started(store):
        records = (await store.recall(RecallParams(query="bone density", limit=5)))["records"]
        by_key = {r["key"]: r for r in records}
        assert set(by_key) == {"long", "small"}
        huge = by_key["long"]
        assert huge["metadata"]["passage"]["length"] == len(docs["long"])
        assert huge["content"].startswith("Bone density falls in winter.")
        assert len(huge["content"]) <= CAP


@pytest.mark.parametrize("search", [{"passages": PASSAGES}, {"highlight": True}])
async def test_an_index_with_a_lower_highlight_bound_still_recalls_its_long_documents(
    node: tuple[str, str], search: dict[str, Any]
) -> None:
    # An operator's index.highlight.max_analyzed_offset below the engines' default: a
    # search asking to analyse more fails as soon as a longer document is a hit. open()
    # reads the index's bound, and what is past it is not highlighted.
    backend, url = node
    index = "a2m-test-highlight-bound"
    docs = _long_and_small(400)
    _index(backend, url, index, docs, settings={"index.highlight.max_analyzed_offset": 5000})
    assert len(docs["long"]) > 5000
    key = "max_analyzed_offset" if backend == "elasticsearch" else "max_analyzer_offset"
    # Not vacuous: the engines' default bound is refused on this index.
    query = {"match": {"text": "bone density"}}
    highlight = {key: ANALYSED_CHARS, "fields": {"text": {}}}
    _refused(backend, url, index, {"query": query, "highlight": highlight}, "max_analy")
    store = _index_store(backend, url, index, "text", **search)
    async with started(store):
        records = (await store.recall(RecallParams(query="bone density", limit=5)))["records"]
    by_key = {r["key"]: r for r in records}
    assert set(by_key) == {"long", "small"}
    long = by_key["long"]
    assert long["content"].startswith("Bone density falls in winter.")
    assert "tail" not in long["content"]  # past the bound: never highlighted
    assert len(long["content"]) <= CAP


async def test_passages_of_a_content_field_that_is_not_indexed(node: tuple[str, str]) -> None:
    # A content field stored but not indexed (index: false; the store searches a title):
    # a highlight query on it fails the search, so the text fields give the terms.
    backend, url = node
    index = "a2m-test-passages-not-indexed"
    filler = FILLER * 20
    docs = {
        "a": "Winter notes on health. " + filler + "Bone density falls in winter.",
        "b": "Summer notes on health. " + filler + "Other words follow.",
    }
    _index(backend, url, index, docs, text={"type": "text", "index": False})
    # Not vacuous: the engine refuses a highlight query on the content field.
    query = {"match": {"title": "notes"}}
    on_content = {"match": {"text": "bone density"}}
    highlight = {"highlight_query": on_content, "fields": {"text": {}}}
    _refused(backend, url, index, {"query": query, "highlight": highlight}, "not indexed")
    store = _index_store(backend, url, index, "title", passages=PASSAGES)
    async with started(store):
        records = (await store.recall(RecallParams(query="winter notes bone density", limit=5)))[
            "records"
        ]
    by_key = {r["key"]: r for r in records}
    assert set(by_key) == {"a", "b"}  # both titles hold "notes"
    passage = by_key["a"]["metadata"]["passage"]
    # The highlighter's best sentence: the one holding the query's words, not the head.
    best = passage["offsets"][passage["best"]]
    assert best[0] > 0
    assert docs["a"][best[0] : best[1]].endswith("Bone density falls in winter.")
    assert len(by_key["a"]["content"]) <= CAP
