"""Unit tests of the hybrid legs and their ``_msearch`` answer: no engine needed."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.base import Condition, Filter, Hit, SearchRequest
from connectors.errors import EngineRejected, EngineUnavailable, QueryTooLarge
from connectors.fusion import clamp01
from connectors.lucene.connector import dialect_for, knn_body
from connectors.lucene.failures import LegFailed, msearch_responses
from connectors.lucene.hybrid import (
    HybridPlanner,
    leg_depth,
    msearch_lines,
    reread_body,
    with_documents,
)
from connectors.lucene.query import QueryTranslator
from tests.connectors.test_lucene import store

SCOPE = {"term": {"acl": {"value": "team-a"}}}


def _planner(engine: str, **search: Any) -> HybridPlanner:
    spec = store(backend=engine, search={"vector_field": "embedding", **search})
    dialect = dialect_for(engine)
    t = QueryTranslator(spec)
    group = spec.fields.group if t.collapse_field else None

    def knn(request: SearchRequest, size: int, depth: int) -> dict[str, Any]:
        return knn_body(dialect, t, "embedding", request, size, depth)

    return HybridPlanner(t, knn, clamp01, group_field=group)


def _request(**kw: Any) -> SearchRequest:
    scoped = Filter(must=(Condition("acl", ("team-a",)),))
    return SearchRequest(limit=10, text="x", dense=[0.1, 0.2], filter=scoped, **kw)


def _knn_filters(body: dict[str, Any]) -> list[Any]:
    if "knn" in body:  # Elasticsearch
        return list(body["knn"]["filter"])
    (clause,) = body["query"]["knn"].values()  # OpenSearch
    return list(clause["filter"]["bool"]["filter"])


@pytest.mark.parametrize("engine", ["elasticsearch", "opensearch"])
def test_shallow_legs_carry_the_scope_and_return_the_mapped_fields(engine: str) -> None:
    legs = _planner(engine).plan(_request(candidates=20), 10).legs
    assert [leg.kind for leg in legs] == ["lexical", "knn"]
    lexical, knn = (leg.body for leg in legs)
    assert SCOPE in lexical["query"]["bool"]["filter"]
    assert SCOPE in _knn_filters(knn)
    for body in (lexical, knn):
        assert body["size"] == 20
        assert body["_source"] == {
            "includes": ["text", "key", "group", "created_at", "doc_id", "title"]
        }


@pytest.mark.parametrize("engine", ["elasticsearch", "opensearch"])
def test_deep_legs_return_ids_only_and_the_page_is_re_read(engine: str) -> None:
    shallow = _planner(engine).plan(_request(candidates=2 * 10), 10)
    assert not shallow.reread
    deep = _planner(engine).plan(_request(candidates=2 * 10 + 1), 10)
    assert deep.reread
    for leg in deep.legs:
        assert leg.body["_source"] is False
        assert leg.body["size"] == 21
    assert SCOPE in deep.legs[0].body["query"]["bool"]["filter"]
    assert SCOPE in _knn_filters(deep.legs[1].body)
    # Collapsing across the legs needs each hit's group.
    folded = _planner(engine, collapse_group=True).plan(_request(), 10)
    assert all(leg.body["_source"] == {"includes": ["group"]} for leg in folded.legs)


def test_the_re_read_carries_the_scope_and_names_index_routing_and_id() -> None:
    t = QueryTranslator(store())
    scope = Filter(must=(Condition("acl", ("team-a",)),))
    hits = [Hit("b", {}, index="i1", routing="A"), Hit("a", {}, index="i2")]
    hits.append(Hit("c", {}, index="i1", routing="A"))
    docs = reread_body(t, hits, scope, with_vectors=False)
    assert docs["query"] == {
        "bool": {
            "filter": [
                SCOPE,
                {
                    "bool": {
                        "should": [
                            {
                                "bool": {
                                    "filter": [
                                        {"ids": {"values": ["b", "c"]}},
                                        {"term": {"_index": "i1"}},
                                        {"term": {"_routing": "A"}},
                                    ]
                                }
                            },
                            {
                                "bool": {
                                    "filter": [
                                        {"ids": {"values": ["a"]}},
                                        {"term": {"_index": "i2"}},
                                        {"bool": {"must_not": [{"exists": {"field": "_routing"}}]}},
                                    ]
                                }
                            },
                        ],
                        "minimum_should_match": 1,
                    }
                },
            ]
        }
    }
    assert docs["size"] == 3
    assert docs["_source"] == t.source(with_vectors=False)


def test_re_read_documents_keep_the_fused_order_and_drop_the_deleted() -> None:
    fused = [Hit("b", {}, score=1.0, index="i"), Hit("a", {}, score=0.5, index="i")]
    fused.append(Hit("gone", {}, score=0.2, index="i"))
    docs = [Hit("a", {"text": "ta"}, index="i"), Hit("b", {"text": "tb"}, index="i")]
    # Another index's copy of the same id is another document: it fills nothing.
    docs.append(Hit("gone", {"text": "other tenant"}, index="j"))
    out = with_documents(fused, docs)
    assert [(h.id, h.source, h.score) for h in out] == [
        ("b", {"text": "tb"}, 1.0),
        ("a", {"text": "ta"}, 0.5),
    ]


def test_a_leg_is_as_deep_as_candidates_but_never_shallower_than_limit() -> None:
    assert leg_depth(SearchRequest(limit=10, candidates=40), 10) == 40
    assert leg_depth(SearchRequest(limit=50, candidates=20), 50) == 50
    assert leg_depth(SearchRequest(limit=10, candidates=50_000), 10) == 10_000


@pytest.mark.parametrize(
    ("weights", "kinds"),
    [
        ((1.0, 1.0), ["lexical", "knn"]),
        ((0.0, 0.0), ["lexical", "knn"]),
        ((1.0, 0.0), ["lexical"]),
        ((0.0, 2.0), ["knn"]),
    ],
)
def test_a_zero_weight_drops_its_leg(weights: tuple[float, float], kinds: list[str]) -> None:
    lw, dw = weights
    legs = _planner("opensearch").plan(_request(lexical_weight=lw, dense_weight=dw), 10).legs
    assert [leg.kind for leg in legs] == kinds


def test_msearch_lines_put_an_empty_header_before_each_body() -> None:
    assert msearch_lines([{"a": 1}, {"b": 2}]) == [{}, {"a": 1}, {}, {"b": 2}]


def _hit(doc: str, score: float, group: str) -> dict[str, Any]:
    return {
        "_id": doc,
        "_index": "scifact",
        "_score": score,
        "_source": {"text": f"t{doc}", "group": group},
    }


def test_fusion_keeps_each_legs_documents_and_collapses_across_legs() -> None:
    planner = _planner("elasticsearch", collapse_group=True)
    request = _request()
    legs = planner.plan(request, 3).legs
    lexical = {"hits": {"hits": [_hit("a", 9.0, "g1"), _hit("b", 5.0, "g2")]}}
    knn = {"hits": {"hits": [_hit("c", 0.9, "g1"), _hit("d", 0.8, "g3"), _hit("b", 0.7, "g2")]}}
    hits = planner.fuse(legs, [lexical, knn], request, 3)
    # b is in both lists; a and c share a group, so only the better of the two survives.
    assert [h.id for h in hits] == ["b", "a", "d"]
    assert [h.source["text"] for h in hits] == ["tb", "ta", "td"]
    assert hits[0].score is not None
    assert hits[0].score > hits[1].score > hits[2].score  # type: ignore[operator]


def test_an_msearch_answer_is_checked_search_by_search() -> None:
    ok = {"hits": {"hits": []}, "status": 200}
    assert msearch_responses({"responses": [ok, ok]}, 2) == [ok, ok]
    with pytest.raises(LegFailed) as missing:
        msearch_responses({"responses": [ok]}, 2)
    assert isinstance(missing.value.failure.error(), EngineUnavailable)
    busy = {"error": {"type": "es_rejected_execution_exception"}, "status": 429}
    with pytest.raises(LegFailed) as rejected:
        msearch_responses({"responses": [ok, busy]}, 2)
    assert rejected.value.failure.transient
    assert isinstance(rejected.value.failure.error(), EngineUnavailable)
    clauses = {
        "error": {
            "type": "search_phase_execution_exception",
            "root_cause": [{"type": "too_many_clauses"}],
        },
        "status": 400,
    }
    with pytest.raises(LegFailed) as large:
        msearch_responses({"responses": [clauses, ok]}, 2)
    assert not large.value.failure.transient
    assert isinstance(large.value.failure.error(), QueryTooLarge)
    bad = {"error": {"type": "parsing_exception"}, "status": 400}
    with pytest.raises(LegFailed) as parse:
        msearch_responses({"responses": [bad, ok]}, 2)
    assert isinstance(parse.value.failure.error(), EngineRejected)
