"""Stages after retrieval against real engines: passages and the group cap.

Elasticsearch 9 and OpenSearch 3 (``A2M_TEST_ELASTICSEARCH9_URL``,
``A2M_TEST_OPENSEARCH3_URL``) hold the whole SciFact corpus; qdrant-edge in process
holds a subset. Recalled records carry passages within the cap and say where they
sit; ``memory/fetch`` of the same key still returns the whole document; with
``per_group`` no group passes the cap and ``limit`` records come back while the
engine has them; with ``passages.rank`` the page comes back re-ordered by its best
passage paragraphs.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connectors.factory import make_connector
from gateway.a2m.params import FetchParams, RecallParams
from gateway.config import validate_store
from gateway.stages.passages import query_terms
from gateway.stages.rank import best_paragraph_scores, fused_order, scanned
from gateway.store.connector_spec import connector_spec
from gateway.store.paging import EngineObserver
from gateway.store.store import Store
from tests.conftest import lucene_node
from tests.support import lucene_loader
from tests.support.scifact import SciFact, load_qdrant, subset, write_documents
from tests.support.stores import started

pytestmark = pytest.mark.integration

INDEX = "a2m-test-scifact"
QUERIES = ["vitamin D deficiency and bone fractures", "insulin resistance in obesity"]


def lucene_store(
    engine: str,
    url: str,
    group: str,
    index: str = INDEX,
    observers: list[EngineObserver] | None = None,
    **search: Any,
) -> Store:
    config = validate_store(
        {
            "backend": engine,
            "index": index,
            "connection": {"hosts": [url], "timeout_ms": 30_000},
            "mapping": {"id": "doc_id", "content": "text", "key": "key", "group": group},
            "search": {"mode": "lexical", "text_fields": ["title", "text"], **search},
        }
    )
    return Store("s", config, make_connector(connector_spec(config)), engine_observers=observers)


def qdrant_store(path: Path, observers: list[EngineObserver] | None = None, **search: Any) -> Store:
    config = validate_store(
        {
            "backend": "qdrant",
            "index": "stages",
            "connection": {"path": str(path)},
            "mapping": {"content": "content", "key": "key", "group": "group"},
            "search": {"mode": "lexical", "sparse_vector": "text-sparse", **search},
        }
    )
    return Store("s", config, make_connector(connector_spec(config)), engine_observers=observers)


@pytest.fixture(scope="module", params=["elasticsearch9", "opensearch3", "qdrant-edge"])
def engine(
    request: pytest.FixtureRequest, scifact: SciFact, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str]:
    """(backend, where): a loaded node's URL, or a qdrant-edge shard's directory."""
    if request.param == "qdrant-edge":
        path = tmp_path_factory.mktemp("stages-qdrant")
        _, docs = subset(scifact, n_queries=50, n_others=400)
        load_qdrant(path, scifact, docs, collection="stages")
        return "qdrant", str(path)
    backend, url = lucene_node(request.param)
    lucene_loader.load_index(backend, url, INDEX, scifact)  # type: ignore[arg-type]
    return backend, url


def store_of(
    engine: tuple[str, str],
    tmp: Path,
    group: str = "group",
    index: str = INDEX,
    observers: list[EngineObserver] | None = None,
    **search: Any,
) -> Store:
    """A store on the engine (a node's ``index``); on qdrant-edge over its own copy of the
    shard (one client a directory)."""
    backend, where = engine
    if backend == "qdrant":
        copy = tmp / f"copy-{len(list(tmp.iterdir()))}"
        shutil.copytree(where, copy)
        return qdrant_store(copy, observers, **search)
    return lucene_store(backend, where, group, index, observers, **search)


async def test_passages_point_into_the_document_fetch_returns(
    engine: tuple[str, str], tmp_path: Path
) -> None:
    # The gateway's windows on every engine (the highlighter's: test_lucene_passages_engines).
    passages = {"max_chars": 300, "count": 2, "by": "gateway"}
    store = store_of(engine, tmp_path, passages=passages)
    whole = store_of(engine, tmp_path)
    async with started(store, whole):
        assert {"stage": "passages", "max_chars": 300, "count": 2, "unit": "sentence"} in (
            store.describe()["search"]["stages"]
        )
        for query in QUERIES:
            records = (await store.recall(RecallParams(query=query, limit=5)))["records"]
            plain = (await whole.recall(RecallParams(query=query, limit=5)))["records"]
            assert [r["id"] for r in records] == [r["id"] for r in plain]
            cut = [r for r in records if "passage" in r.get("metadata", {})]
            assert cut  # SciFact abstracts are mostly longer than 300 characters
            for record in cut:
                assert len(record["content"]) <= 300
                fetched = (await store.fetch(FetchParams(key=record["key"])))["record"]
                document = fetched["content"]
                where = record["metadata"]["passage"]
                assert where["length"] == len(document) > 300
                pieces = [document[start:end] for start, end in where["offsets"]]
                assert record["content"] == " … ".join(pieces)
                assert "passage" not in fetched.get("metadata", {})


async def test_per_group_caps_each_group_and_keeps_the_limit(
    engine: tuple[str, str], tmp_path: Path
) -> None:
    # Lucene: two groups (the parity of the id), so a cap of 3 needs a deeper page;
    # qdrant-edge: seven groups (the id modulo 7), capped at 1.
    group, cap = ("group", 1) if engine[0] == "qdrant" else ("acl", 3)
    store = store_of(engine, tmp_path, group, per_group=cap)
    plain = store_of(engine, tmp_path, group)
    async with started(store, plain):
        for query in QUERIES:
            capped = (await store.recall(RecallParams(query=query, limit=6)))["records"]
            free = (await plain.recall(RecallParams(query=query, limit=100)))["records"]
            assert len(capped) == 6
            assert max(Counter(r["group"] for r in capped).values()) <= cap
            # Not vacuous: uncapped, the top 20 hold more than `cap` of some group.
            assert max(Counter(r["group"] for r in free[:20]).values()) > cap
            # The cap keeps the engine's order: each kept record is the next one of its group.
            assert [r["id"] for r in capped] == _capped(free, cap)[:6]


async def test_per_group_folds_what_it_leaves_out_within_the_limit(
    engine: tuple[str, str], tmp_path: Path
) -> None:
    # Lucene: two groups (the parity of the id); qdrant-edge: seven (the id modulo 7).
    group = "group" if engine[0] == "qdrant" else "acl"
    store = store_of(engine, tmp_path, group, per_group=1)
    unfolded = store_of(engine, tmp_path, group, per_group=1, fold_groups=False)
    plain = store_of(engine, tmp_path, group)
    async with started(store, unfolded, plain):
        for query in QUERIES:
            folded = (await store.recall(RecallParams(query=query, limit=10)))["records"]
            dropped = (await unfolded.recall(RecallParams(query=query, limit=10)))["records"]
            free = (await plain.recall(RecallParams(query=query, limit=10)))["records"]
            assert [r["id"] for r in folded] == [r["id"] for r in dropped]
            # Every text a plain recall of 10 returns is in the capped recall, at its range.
            texts = {r["id"]: r["content"] for r in free}
            held: dict[str, str] = {}
            for record in folded:
                chunks = record.get("metadata", {}).get("chunks")
                if chunks is None:
                    held[record["id"]] = record["content"]
                    continue
                assert chunks[0]["id"] == record["id"]
                for chunk in chunks:
                    start, end = chunk["range"]
                    held[chunk["id"]] = record["content"][start:end]
            assert {i: held.get(i) for i in texts} == texts
            # Not vacuous: more than one record of a group in 10 (two or seven groups), so
            # unfolded, the cap loses some of those texts.
            assert not set(texts) <= {r["id"] for r in dropped}


def _capped(records: list[dict[str, Any]], n: int) -> list[str]:
    seen: Counter[str] = Counter()
    out: list[str] = []
    for r in records:
        if seen[r["group"]] >= n:
            continue
        seen[r["group"]] += 1
        out.append(r["id"])
    return out


async def test_one_per_group_when_fewer_groups_than_limit(
    engine: tuple[str, str], tmp_path: Path
) -> None:
    # Two groups on Elasticsearch/OpenSearch (the parity of the id), seven on qdrant-edge:
    # the deeper page leaves out the groups at the cap, and the engine has no more.
    group, groups = ("group", 7) if engine[0] == "qdrant" else ("acl", 2)
    searches: list[str] = []

    def note(store: str, operation: str, seconds: float, error: str | None) -> None:
        if operation == "search":
            searches.append(operation)

    store = store_of(engine, tmp_path, group, observers=[note], per_group=1)
    async with started(store):
        records = (await store.recall(RecallParams(query=QUERIES[0], limit=10)))["records"]
        assert len(records) == groups
        assert len({r["group"] for r in records}) == groups
        # The first page (40; on qdrant-edge's subset it holds every match), then at most
        # one of 160 that finds no other group: not the pages of 640, 2,560 and 10,000
        # every record of which the cap would drop.
        assert len(searches) <= 2
        # A `where` naming one group: its first record, in no more reads.
        searches.clear()
        one = records[0]["group"]
        params = RecallParams(query=QUERIES[0], limit=10, where={"group": one})
        named = (await store.recall(params))["records"]
        assert [r["group"] for r in named] == [one]
        assert len(searches) <= 2


LONG_INDEX = "a2m-test-long-stages"
SECTIONS = 4
"""Abstracts a long document holds, each a paragraph (a blank line apart)."""


def _long_documents(sf: SciFact, n: int = 80) -> list[dict[str, Any]]:
    """``n`` documents of SECTIONS consecutive SciFact abstracts each (the first one's id
    and vector), as tests.support.scifact.documents shapes a payload."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        ids = sf.corpus_ids[i * SECTIONS : (i + 1) * SECTIONS]
        content = "\n\n".join(sf.content(d) for d in ids)
        out.append({"id": int(ids[0]), "content": content, "key": f"long/{i}", "group": f"g{i}"})
    return out


@pytest.fixture(scope="module")
def long_engine(
    engine: tuple[str, str], scifact: SciFact, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str]:
    """``engine`` holding documents of several paragraphs (:func:`_long_documents`): in
    LONG_INDEX on a node, or a qdrant-edge shard of its own."""
    backend, where = engine
    docs = _long_documents(scifact)
    if backend == "qdrant":
        path = tmp_path_factory.mktemp("stages-long")
        write_documents(path, scifact, docs, collection="stages")
        return backend, str(path)
    client = lucene_loader.lucene_client(backend, where)
    try:
        if client.indices.exists(index=LONG_INDEX):
            client.indices.delete(index=LONG_INDEX)
        client.indices.create(index=LONG_INDEX, body=lucene_loader.index_body(backend))  # type: ignore[arg-type]
        for d in docs:
            source = {
                "doc_id": str(d["id"]),
                "key": d["key"],
                "title": "",
                "text": d["content"],
                "group": d["group"],
            }
            client.index(index=LONG_INDEX, id=str(d["id"]), body=source)
        client.indices.refresh(index=LONG_INDEX)
    finally:
        client.close()
    return backend, where


async def test_passages_rank_orders_the_page_by_its_best_passage_paragraphs(
    long_engine: tuple[str, str], tmp_path: Path, scifact: SciFact
) -> None:
    # The highlighter's passages on Elasticsearch/OpenSearch, the gateway's on qdrant-edge.
    passages = {"max_chars": 300, "count": 2}
    # (qdrant-edge's store reads its own shard, whatever the index)
    ranked = store_of(long_engine, tmp_path, index=LONG_INDEX, passages=passages)  # on by default
    plain = store_of(long_engine, tmp_path, index=LONG_INDEX, passages={**passages, "rank": False})
    queries = [*QUERIES, *(scifact.queries[q] for q in scifact.query_ids[:12])]
    moved = 0
    async with started(ranked, plain):
        assert {"stage": "rank", "by": "best_paragraph", "k": 60} in (
            ranked.describe()["search"]["stages"]
        )
        for query in queries:
            got = (await ranked.recall(RecallParams(query=query, limit=10)))["records"]
            page = (await plain.recall(RecallParams(query=query, limit=10)))["records"]
            # The same page, re-ordered as gateway.stages.rank orders the whole documents:
            # by the paragraph of the engine's best passage, or by those of all the
            # gateway's passages.
            texts: list[tuple[str, list[tuple[int, int]]]] = []
            for record in page:
                document = (await plain.fetch(FetchParams(key=record["key"])))["record"]
                where = record.get("metadata", {}).get("passage", {"offsets": []})
                spans = [(s, e) for s, e in where["offsets"]]
                if long_engine[0] != "qdrant" and spans:
                    spans = spans[where["best"] : where["best"] + 1]
                texts.append((document["content"], spans))
            wanted = query_terms(query)
            order = fused_order(best_paragraph_scores([scanned(t, s, wanted) for t, s in texts]))
            want = [page[i]["id"] for i in order]
            assert [r["id"] for r in got] == want
            assert [r["content"] for r in got] == [page[i]["content"] for i in order]
            # The page's scores given out in the new order: still descending (A2M §5.3).
            assert [r["score"] for r in got] == [r["score"] for r in page]
            moved += want != [r["id"] for r in page]
        assert moved  # the rank changed some page's order: the check above is not vacuous


async def test_a_page_of_one_paragraph_records_keeps_the_engines_order(
    engine: tuple[str, str], tmp_path: Path
) -> None:
    # SciFact's records are one abstract each: the rank, on by default, leaves the page.
    passages = {"max_chars": 300, "count": 2}
    ranked = store_of(engine, tmp_path, passages=passages)
    plain = store_of(engine, tmp_path, passages={**passages, "rank": False})
    async with started(ranked, plain):
        for query in QUERIES:
            got = (await ranked.recall(RecallParams(query=query, limit=10)))["records"]
            page = (await plain.recall(RecallParams(query=query, limit=10)))["records"]
            assert len(page) == 10
            assert got == page
