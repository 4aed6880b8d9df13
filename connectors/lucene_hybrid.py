"""Lucene hybrid search in one engine round trip: both legs in one ``_msearch``, fused here.

Each leg (BM25 ``multi_match``, kNN) is a whole ``_search`` body built by the
translator and the dialect, so each carries the request's filter, the caller's
scope included, in every place it selects documents (the query's
``bool.filter``, the kNN clause's filter). Each leg returns ``candidates`` hits
with ``_source`` limited to the mapped fields, so the fused page needs no
re-read: the documents travel with the legs.

Native fusion was measured and is not used: the shipped Elasticsearch test
distribution (basic licence) answers ``unknown retriever [rrf]``, and the
OpenSearch test nodes have no neural-search plugin, so no ``hybrid`` query
(docs/benchmarks.md, "Hybrid cost").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from connectors.base import Hit, SearchRequest, value_at
from connectors.fusion import fuse_rrf
from connectors.lucene_query import MAX_WINDOW, Body, QueryTranslator

KnnBody = Callable[[QueryTranslator, SearchRequest, int, int], Body]
"""The dialect's kNN body: (translator, request, size, depth) -> a ``_search`` body."""


@dataclass(frozen=True, slots=True)
class Leg:
    """One ranked list of a hybrid search: its body and its RRF weight."""

    kind: Literal["lexical", "knn"]
    body: Body
    weight: float


def leg_depth(request: SearchRequest, limit: int) -> int:
    """Hits per leg: ``candidates``, at least ``limit``, at most the result window."""
    return min(max(request.candidates, limit), MAX_WINDOW)


class HybridPlanner:
    """Plans the legs of a hybrid search and fuses their answers (pure: no I/O)."""

    def __init__(
        self,
        translator: QueryTranslator,
        knn_body: KnnBody,
        knn_score: Callable[[float], float],
        *,
        group_field: str | None,
    ) -> None:
        """
        Args:
            translator: the store's query translator.
            knn_body: the dialect's kNN body builder.
            knn_score: the dialect's raw kNN ``_score`` -> [0, 1].
            group_field: the source field results collapse on, or None.
        """
        self._t = translator
        self._knn_body = knn_body
        self._knn_score = knn_score
        self._group = group_field

    def legs(self, request: SearchRequest, limit: int) -> list[Leg]:
        """The legs to run: both, unless exactly one weight is positive."""
        depth = leg_depth(request, limit)
        lw, dw = request.lexical_weight, request.dense_weight
        both = (lw > 0) == (dw > 0)
        legs: list[Leg] = []
        if both or lw > 0:
            legs.append(Leg("lexical", self._t.lexical(request, depth), lw))
        if both or dw > 0:
            legs.append(Leg("knn", self._knn_body(self._t, request, depth, depth), dw))
        return legs

    def fuse(
        self,
        legs: Sequence[Leg],
        responses: Sequence[Mapping[str, Any]],
        request: SearchRequest,
        limit: int,
    ) -> list[Hit]:
        """The fused top ``limit`` hits, best first, scores in [0, 1], documents attached."""
        ranked: list[tuple[list[Hit], float]] = []
        for leg, response in zip(legs, responses, strict=True):
            hits = self._t.hits(response, with_vectors=request.with_vectors)
            if leg.kind == "knn":
                for h in hits:
                    h.score = self._knn_score(h.score) if h.score is not None else 0.0
            ranked.append((hits, leg.weight))
        group = self._group
        return fuse_rrf(
            ranked,
            k=request.rrf_k,
            limit=limit,
            group_of=(lambda h: value_at(h.source, group)) if group else None,
        )


def msearch_lines(bodies: Sequence[Body]) -> list[Body]:
    """The ``_msearch`` payload: an empty header (the index is the request's) before each body."""
    lines: list[Body] = []
    for body in bodies:
        lines.extend(({}, body))
    return lines
