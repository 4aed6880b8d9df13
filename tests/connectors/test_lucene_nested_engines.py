"""Nested passages (``search.nested_passages``) against real Elasticsearch and OpenSearch.

A small index on each node (8.19 and 9.x, 2.19 and 3.x) keeps each document's sections
twice: in its content, and as nested passages with their own vectors. The kNN leg ranks
a document by its best section and names it: that section leads the record's passages,
within the cap, at offsets that slice the document ``memory/fetch`` returns. The other
tenant holds a document whose section matches the query vector better: a scoped caller
never sees it, nor any of its passages.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.factory import make_connector
from gateway.a2m.params import FetchParams, RecallParams
from gateway.config import validate_store
from gateway.security.scopes import Caller, Principal
from gateway.store.connector_spec import connector_spec
from gateway.store.store import Store
from tests.conftest import lucene_node
from tests.support import lucene_loader
from tests.support.stores import started

pytestmark = pytest.mark.integration

INDEX = "a2m-test-nested-passages"
CAP = 240
ACL = {"filters": [{"field": "acl", "claims": ["groups"]}]}
QUERY = [1.0, 0.0, 0.0, 0.0]
NODES = ("elasticsearch9", "opensearch3", "elasticsearch", "opensearch")


def _section(topic: str, words: str) -> str:
    return (
        f"{topic} is the subject here. The study of {words} took three years. "
        f"Its authors measured {words} in two cohorts and report the results below."
    )


# Per document: its tenant and its sections (text, vector). The query vector is QUERY.
DOCS: dict[str, tuple[str, list[tuple[str, list[float]]]]] = {
    "a1": (
        "a",
        [
            (_section("Glacier retreat", "glacier ice"), [0.0, 1.0, 0.0, 0.0]),
            (_section("Coastal erosion", "sand dunes"), [0.0, 0.0, 1.0, 0.0]),
            (_section("Kelp forests", "kelp growth"), [0.9, 0.1, 0.0, 0.0]),
            (_section("Tidal energy", "tidal turbines"), [0.0, 0.0, 0.0, 1.0]),
        ],
    ),
    "a2": (
        "a",
        [
            (_section("River deltas", "delta silt"), [0.0, 0.0, 1.0, 0.0]),
            (_section("Mangrove roots", "mangrove roots"), [0.5, 0.5, 0.0, 0.0]),
            (_section("Salt marshes", "marsh grass"), [0.0, 0.0, 0.0, 1.0]),
        ],
    ),
    "b1": (
        "b",
        [
            (_section("Volcanic soils", "ash layers"), [0.0, 1.0, 0.0, 0.0]),
            (_section("Secret reef survey", "reef corals"), [1.0, 0.0, 0.0, 0.0]),
            (_section("Lava tubes", "lava caves"), [0.0, 0.0, 1.0, 0.0]),
        ],
    ),
}


def _content(key: str) -> str:
    return "\n\n".join(text for text, _ in DOCS[key][1])


def _start(key: str, section: int) -> int:
    texts = [text for text, _ in DOCS[key][1]]
    return sum(len(t) + 2 for t in texts[:section])


def _load(backend: str, url: str) -> None:
    if backend == "elasticsearch":
        vector: dict[str, Any] = {"type": "dense_vector", "dims": 4, "similarity": "cosine"}
        settings: dict[str, Any] = {}
    else:
        method = {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}
        vector = {"type": "knn_vector", "dimension": 4, "method": method}
        settings = {"index": {"knn": True}}
    nested = {"text": {"type": "text"}, "start": {"type": "integer"}, "vector": vector}
    properties = {
        "key": {"type": "keyword"},
        "acl": {"type": "keyword"},
        "text": {"type": "text"},
        "sections": {"type": "nested", "properties": nested},
    }
    client = lucene_loader.lucene_client(backend, url)
    try:
        if client.indices.exists(index=INDEX):
            client.indices.delete(index=INDEX)
        body = {"settings": settings, "mappings": {"properties": properties}}
        client.indices.create(index=INDEX, body=body)
        for key, (acl, sections) in DOCS.items():
            parts = [
                {"text": text, "start": _start(key, i), "vector": vec}
                for i, (text, vec) in enumerate(sections)
            ]
            source = {"key": key, "acl": acl, "text": _content(key), "sections": parts}
            client.index(index=INDEX, id=key, body=source)
        client.indices.refresh(index=INDEX)
    finally:
        client.close()


@pytest.fixture(scope="module", params=NODES)
def node(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(backend, URL) of a node holding the nested index."""
    backend, url = lucene_node(request.param)
    _load(backend, url)
    return backend, url


def _store(node: tuple[str, str], start: bool = True, **extra: Any) -> Store:
    backend, url = node
    nested = {"path": "sections", "text_field": "sections.text"}
    if start:
        nested["start_field"] = "sections.start"
    config = validate_store(
        {
            "backend": backend,
            "index": INDEX,
            "connection": {"hosts": [url], "timeout_ms": 30_000},
            "mapping": {"content": "text", "key": "key", "metadata": ["acl"]},
            "search": {
                "mode": "lexical",
                "text_fields": ["text"],
                "vector_field": "sections.vector",
                "nested_passages": nested,
                "passages": {"max_chars": CAP, "count": 2},
            },
            **extra,
        }
    )
    return Store("s", config, make_connector(connector_spec(config)))


async def _check_slices(store: Store, record: dict[str, Any]) -> list[tuple[int, int]]:
    """The record's passage offsets, checked to slice the document fetch returns."""
    where = record["metadata"]["passage"]
    document = (await store.fetch(FetchParams(key=record["key"])))["record"]["content"]
    assert document == _content(record["key"])
    assert where["length"] == len(document)
    pieces = [document[start:end] for start, end in where["offsets"]]
    assert record["content"] == " … ".join(pieces)
    assert len(record["content"]) <= CAP
    return [(int(s), int(e)) for s, e in where["offsets"]]


@pytest.mark.parametrize("start", [True, False], ids=["start-field", "located"])
async def test_the_best_nested_passage_leads_the_records_content(
    node: tuple[str, str], start: bool
) -> None:
    # "glacier" is in a1's first section (the highlighter's); its kelp section is the
    # nearest of its sections to the query vector (the kNN leg's).
    store = _store(node, start=start)
    async with started(store):
        params = RecallParams(query="glacier", embedding=QUERY, limit=5)
        records = (await store.recall(params))["records"]
        by_key = {r["key"]: r for r in records}
        assert {"a1", "a2", "b1"} <= set(by_key)
        spans = await _check_slices(store, by_key["a1"])
        starts = [s for s, _ in spans]
        assert starts == [0, _start("a1", 2)]
        assert by_key["a1"]["content"].split(" … ")[1].startswith("Kelp forests")
        # A document only the kNN leg found: its best section alone is its passage head.
        b1 = await _check_slices(store, by_key["b1"])
        assert _start("b1", 1) in [s for s, _ in b1]
        assert all(len(r["content"]) <= CAP for r in records)


async def test_a_scoped_caller_never_sees_the_other_tenants_better_passage(
    node: tuple[str, str],
) -> None:
    scoped, free = _store(node, scope=ACL), _store(node)
    caller = Caller(principal=Principal("alice", {"sub": "alice", "groups": ["a"]}, "embedded"))
    params = RecallParams(query="survey results", embedding=QUERY, limit=5)
    async with started(scoped, free):
        everyone = (await free.recall(params))["records"]
        # Not vacuous: unscoped, the other tenant's document ranks first by its passage.
        assert everyone[0]["key"] == "b1"
        assert "Secret reef survey" in everyone[0]["content"]
        mine = (await scoped.recall(params, caller))["records"]
        assert [r["key"] for r in mine] == ["a1", "a2"]
        assert all(r["metadata"]["acl"] == "a" for r in mine)
        assert not any("reef" in r["content"] or "Volcanic" in r["content"] for r in mine)
        # The dense-only path (no query text: no passages) keeps the scope as well.
        dense = (await scoped.recall(RecallParams(embedding=QUERY, limit=5), caller))["records"]
        assert {r["key"] for r in dense} == {"a1", "a2"}
