"""Unit tests of nested passages (connectors.lucene.nested): no engine needed.

The config's checks, the kNN leg each dialect builds over a nested vector field (the
scope filter on the parent document, ``inner_hits`` only with passages), and how the
anchors an engine names become the record's passages. The whole connector is driven
through :class:`connectors.engine_transport.MockTransport` for the request it sends
and the passages it makes of the answer; the same against real nodes is in
test_lucene_nested_engines.py.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from connectors.base import Condition, Filter, SearchRequest
from connectors.engine_transport import EngineRequest, MockTransport, Response, json_response
from connectors.errors import EngineConfigError
from connectors.lucene.connector import LuceneConnector
from connectors.lucene.nested import anchor_spans, anchors_of, inner_hits_clause
from connectors.lucene.passages import passages_of
from connectors.lucene.query import QueryTranslator
from connectors.lucene.spec import LuceneConnectionSpec, LuceneSpec
from connectors.spec import ConnectorSpec, FieldsSpec, NestedPassageSpec, PassageSpec, SearchSpec
from gateway.config import validate_store
from gateway.store.connector_spec import connector_spec

ENGINES = ("elasticsearch", "opensearch")
PRODUCT = {"x-elastic-product": "Elasticsearch"}
NESTED = NestedPassageSpec("sections", "sections.text", "sections.start")
SPEC = PassageSpec(max_chars=120, count=2, fragment_chars=57)
SCOPE = {"term": {"acl": {"value": "team-a"}}}
DOC = (
    "Winter light is short in the north. People sleep longer then.\n\n"
    "Bone density falls with low vitamin D. Fractures follow in old age.\n\n"
    "Bone scans measure density. The scans are quick and cheap to run."
)
SECOND = DOC.index("Bone density")
THIRD = DOC.index("Bone scans")


def _vector(kind: str) -> dict[str, Any]:
    if kind == "elasticsearch":
        return {"type": "dense_vector", "dims": 2, "similarity": "cosine"}
    return {"type": "knn_vector", "dimension": 2, "space_type": "cosinesimil"}


def _mapping(backend: str, nested_type: str = "nested") -> dict[str, Any]:
    sections = {
        "type": nested_type,
        "properties": {
            "text": {"type": "text"},
            "start": {"type": "integer"},
            "vector": _vector(backend),
        },
    }
    props = {"text": {"type": "text"}, "acl": {"type": "keyword"}, "sections": sections}
    return {"idx": {"mappings": {"properties": props}}}


def _spec(backend: str, passages: PassageSpec | None = SPEC) -> LuceneSpec:
    return ConnectorSpec(
        backend=backend,
        index="idx",
        connection=LuceneConnectionSpec(hosts=("http://engine.test:9200",), retries=0),
        fields=FieldsSpec(read=("text", "acl"), content="text", scope=("acl",)),
        search=SearchSpec(
            mode="hybrid",
            text_fields=("text",),
            vector_field="sections.vector",
            passages=passages,
            nested=NESTED,
        ),
    )


def _inner(*sections: tuple[str, int]) -> dict[str, Any]:
    hits = [{"_source": {"text": text, "start": start}} for text, start in sections]
    return {"sections": {"hits": {"hits": hits}}}


def _engine(backend: str, nested_type: str = "nested", version: str = "9.1.0") -> MockTransport:
    """A hybrid engine: its kNN leg names DOC's third section as the best passage; the
    re-read of the fused page carries DOC and highlighter fragments from all sections."""
    headers = PRODUCT if backend == "elasticsearch" else {}
    anchor = DOC[THIRD:]
    leg = {"hits": {"hits": [{"_id": "d", "_score": 0.9, "inner_hits": _inner((anchor, THIRD))}]}}
    lexical = {"hits": {"hits": [{"_id": "d", "_score": 3.0}]}}
    fragments = ["Bone density falls with low vitamin D.", "Bone scans measure density."]
    doc = {"_id": "d", "_source": {"text": DOC, "acl": "team-a"}, "highlight": {"text": fragments}}

    def handler(request: EngineRequest) -> Response:
        if request.path == "/idx/_mapping":
            return json_response(_mapping(backend, nested_type), headers=headers)
        if request.path == "/idx/_msearch":
            return json_response({"responses": [lexical, leg]}, headers=headers)
        if request.path == "/idx/_search":
            return json_response({"hits": {"hits": [doc]}}, headers=headers)
        if request.path == "/":
            return json_response({"version": {"number": "3.1.0"}}, headers=headers)
        if request.path.startswith("/_nodes/"):
            return json_response({"nodes": {"n": {"version": version}}}, headers=headers)
        return json_response({"error": "no such path"}, 404, headers)

    return MockTransport(handler)


def _request() -> SearchRequest:
    scoped = Filter(must=(Condition("acl", ("team-a",)),))
    return SearchRequest(
        limit=5, text="bone scans", dense=[0.0, 1.0], filter=scoped, passage_text="bone scans"
    )


def _legs(engine: MockTransport) -> list[dict[str, Any]]:
    sent = [r for r in engine.requests if r.path == "/idx/_msearch"]
    assert len(sent) == 1
    lines = [orjson.loads(line) for line in sent[0].body.splitlines() if line.strip()]
    return lines[1::2]


async def test_elasticsearch_knn_leg_searches_the_nested_vectors_scoped_with_inner_hits() -> None:
    engine = _engine("elasticsearch")
    connector = LuceneConnector(_spec("elasticsearch"), transport=engine)
    await connector.open()
    hits = await connector.search(_request())
    await connector.close()
    knn = _legs(engine)[1]["knn"]
    assert knn["field"] == "sections.vector"
    # The scope pre-filters the parent documents inside the knn section.
    assert SCOPE in knn["filter"]
    assert knn["inner_hits"] == inner_hits_clause(NESTED)
    # The section the kNN leg named leads; the highlighter's best of another paragraph
    # follows (in text order).
    (hit,) = hits
    assert hit.passages is not None
    assert [s for s, _ in hit.passages.spans] == [SECOND, THIRD]
    assert hit.passages.best == 1  # the named section's passage, second in text order
    assert hit.passages.texts[1] == "Bone scans measure density. The scans are quick and"
    assert hit.passages.texts == tuple(DOC[s:e] for s, e in hit.passages.spans)


async def test_opensearch_knn_leg_is_nested_and_the_scope_filters_the_parents() -> None:
    engine = _engine("opensearch")
    connector = LuceneConnector(_spec("opensearch"), transport=engine)
    await connector.open()
    hits = await connector.search(_request())
    await connector.close()
    query = _legs(engine)[1]["query"]
    # The scope pre-filters the parents inside the knn query, and holds around it.
    assert query["bool"]["filter"] == [SCOPE]
    (nested,) = query["bool"]["must"]
    assert nested["nested"]["path"] == "sections"
    assert nested["nested"]["score_mode"] == "max"
    knn = nested["nested"]["query"]["knn"]["sections.vector"]
    assert knn["vector"] == [0.0, 1.0]
    assert knn["filter"] == {"bool": {"filter": [SCOPE]}}
    assert nested["nested"]["inner_hits"] == inner_hits_clause(NESTED)
    assert hits[0].passages is not None
    assert THIRD in [s for s, _ in hits[0].passages.spans]


@pytest.mark.parametrize("backend", ENGINES)
async def test_without_passages_the_leg_asks_for_no_inner_hits(backend: str) -> None:
    engine = _engine(backend)
    connector = LuceneConnector(_spec(backend, passages=None), transport=engine)
    await connector.open()
    await connector.search(_request())
    await connector.close()
    assert "inner_hits" not in str(_legs(engine)[1])
    assert "sections.vector" in str(_legs(engine)[1])


@pytest.mark.parametrize("backend", ENGINES)
async def test_a_path_that_is_not_nested_is_refused_at_open(backend: str) -> None:
    connector = LuceneConnector(_spec(backend), transport=_engine(backend, "object"))
    with pytest.raises(EngineConfigError, match=r"nested_passages\.path.*not 'nested'"):
        await connector.open()


async def test_an_elasticsearch_older_than_8_11_is_refused_at_open_and_8_11_opens() -> None:
    old = LuceneConnector(
        _spec("elasticsearch"), transport=_engine("elasticsearch", version="8.10.4")
    )
    with pytest.raises(EngineConfigError, match=r"nested_passages: elasticsearch 8\.10\.4 .*8\.11"):
        await old.open()
    first = LuceneConnector(
        _spec("elasticsearch"), transport=_engine("elasticsearch", version="8.11.0")
    )
    info = await first.open()
    await first.close()
    assert info.engine == "elasticsearch 8.11.0"


def test_a_document_vector_is_never_read_from_the_nested_passages() -> None:
    # Asked for vectors, the body would otherwise read every passage's vector.
    t = QueryTranslator(_spec("elasticsearch"))
    assert t.source(with_vectors=True) == {"includes": ["text", "acl"]}


def test_anchors_are_read_best_first_with_their_start() -> None:
    raw = {"inner_hits": _inner(("b", 4), ("a", 0))}
    assert anchors_of(raw, NESTED) == (("b", 4), ("a", 0))
    assert anchors_of({"inner_hits": {}}, NESTED) == ()
    no_start = NestedPassageSpec("sections", "sections.text")
    assert anchors_of(raw, no_start) == (("b", None), ("a", None))


def test_anchors_of_an_answer_of_another_shape_are_none() -> None:
    shapes: list[Any] = [[], {"sections": []}, {"sections": {"hits": {"hits": {}}}}]
    for inner in shapes:
        assert anchors_of({"inner_hits": inner}, NESTED) == ()
    odd = {"sections": {"hits": {"hits": ["x", {"_source": []}, {"_source": {"text": " "}}]}}}
    assert anchors_of({"inner_hits": odd}, NESTED) == ()


def test_a_leg_that_reads_ids_names_its_anchors_and_cuts_no_passage() -> None:
    t = QueryTranslator(_spec("elasticsearch"))
    anchor = {"_id": "d", "_score": 1.0, "inner_hits": _inner((DOC[THIRD:], THIRD))}
    fragment = {"text": ["Bone scans measure density."]}
    leg = {"hits": {"hits": [anchor, {"_id": "e", "_source": {}, "highlight": fragment}]}}
    named, bare = t.hits(leg, with_vectors=False)
    assert named.anchors == ((DOC[THIRD:], THIRD),)
    assert named.passages is None
    assert bare.passages is None
    # The page's re-read is given the leg's anchors for the hit that carries none.
    page = {"hits": {"hits": [{"_id": "d", "_source": {"text": DOC}, "highlight": fragment}]}}
    (doc,) = t.hits(page, with_vectors=False, anchors={named.identity: named.anchors})
    assert doc.anchors == named.anchors
    assert doc.passages is not None
    assert doc.passages.spans[0][0] == THIRD


def test_an_anchor_is_found_at_its_start_else_at_its_first_occurrence() -> None:
    text = "ab. ab. cd."
    assert anchor_spans(text, [("ab.", 4)]) == [(4, 7)]
    assert anchor_spans(text, [("ab.", 9)]) == [(0, 3)]
    assert anchor_spans(text, [("ab.", None), ("zz", None)]) == [(0, 3)]


def test_the_anchor_leads_and_the_highlighters_other_paragraphs_follow() -> None:
    one = PassageSpec(max_chars=120, count=1, fragment_chars=100)
    fragments = ["Winter light is short in the north.", "Bone scans measure density."]
    # No fragment inside the anchor: its head stands for it, and leads.
    got = passages_of({"text": DOC}, "text", fragments[:1], one, [(DOC[SECOND:THIRD], None)])
    assert got is not None
    assert got.spans[0][0] == SECOND
    assert got.spans[0][1] - SECOND <= 100
    # A fragment inside the anchor leads, before a better-ranked one outside it.
    got = passages_of({"text": DOC}, "text", fragments, one, [(DOC[THIRD:], THIRD)])
    assert got is not None
    assert got.spans[0][0] == THIRD
    # Both kept with room for two, in text order.
    two = passages_of({"text": DOC}, "text", fragments, SPEC, [(DOC[THIRD:], THIRD)])
    assert two is not None
    assert [s for s, _ in two.spans] == [0, THIRD]
    # No anchor found in the content: the highlighter's fragments as before.
    plain = passages_of({"text": DOC}, "text", fragments, one, [("not in it", None)])
    assert plain is not None
    assert plain.spans[0][0] == 0


def _store(nested: dict[str, Any], **search: Any) -> dict[str, Any]:
    return {
        "backend": "elasticsearch",
        "index": "idx",
        "connection": {"hosts": ["http://127.0.0.1:9200"]},
        "mapping": {"content": "text"},
        "search": {
            "mode": "hybrid",
            "text_fields": ["text"],
            "vector_field": "s.v",
            "embedder": {"kind": "minilm"},
            "nested_passages": nested,
            **search,
        },
    }


@pytest.mark.parametrize(
    ("nested", "search", "message"),
    [
        ({"path": "s", "text_field": "t"}, {}, "text_field: 't' is not a field under path 's'"),
        ({"path": "s", "text_field": "s.t", "start_field": "s"}, {}, "start_field"),
        ({"path": "s", "text_field": "s.t"}, {"vector_field": "v"}, "must be a field under"),
        (
            {"path": "s", "text_field": "s.t"},
            {"mode": "lexical", "vector_field": None},
            "must be a field under",
        ),
        ({"path": "", "text_field": "s.t"}, {}, "path"),
    ],
)
def test_config_refuses_fields_outside_the_nested_path(
    nested: dict[str, Any], search: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        validate_store(_store(nested, **search))


def test_config_gives_the_connector_its_nested_spec() -> None:
    nested = {"path": "s", "text_field": "s.t", "start_field": "s.at"}
    spec = connector_spec(validate_store(_store(nested)))
    # A lexical store serves a caller's vector too: its kNN leg is the nested one.
    assert connector_spec(validate_store(_store(nested, mode="lexical"))).search.nested
    assert spec.search.nested == NestedPassageSpec("s", "s.t", "s.at")
    assert spec.search.vector_field == "s.v"
    # Another engine has no such key.
    qdrant = {**_store(nested), "backend": "qdrant", "connection": {"url": "http://q:6333"}}
    with pytest.raises(ValidationError, match="nested_passages"):
        validate_store(qdrant)
