"""Lucene hybrid search in one or two engine round trips: both legs in one ``_msearch``.

Each leg (BM25 ``multi_match``, kNN) is a whole ``_search`` body built by the
translator and the dialect, so each carries the request's filter, the caller's
scope included, in every place it selects documents (the query's
``bool.filter``, the kNN clause's filter). The legs are fused here
(``search.fusion``, :func:`connectors.fusion.fuse`).

Where the fused page's documents come from depends on the legs' depth (measured,
docs/benchmarks.md "Hybrid cost"): the engine's cost of a leg grows with the
``_source`` it parses, so

- legs at most ``INLINE_FACTOR`` x ``limit`` deep return their documents (mapped
  fields only) and the fused page needs nothing more: **one** round trip;
- deeper legs return ids (and the group, to collapse) only, and the fused page is
  re-read in one query that names each hit by index, routing and id (an ``_id`` is
  unique only within one index and routing value) and carries the filter again:
  **two** round trips, cheaper for the engine than parsing every candidate's source;
- with passages by the engine (``search.passages``, :mod:`connectors.lucene.passages`)
  the legs always return ids, and the re-read of the fused page carries the highlight:
  only the page's documents are highlighted and read whole.

Native fusion was measured and is not used: the shipped Elasticsearch test
distribution (basic licence) answers ``unknown retriever [rrf]``, and the
OpenSearch test nodes have no neural-search plugin, so no ``hybrid`` query
(docs/benchmarks.md, "Hybrid cost").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from connectors.base import Filter, Hit, SearchRequest, value_at
from connectors.fusion import fuse
from connectors.lucene.filters import any_of
from connectors.lucene.query import MAX_WINDOW, Body, QueryTranslator

INLINE_FACTOR = 2
"""Legs up to this many times ``limit`` deep carry their documents (one round trip).
Measured on SciFact: at 2 x limit both shapes cost the engine the same within noise;
at 5-10 x limit parsing every leg's sources costs 15-35 % more than a re-read."""

KnnBody = Callable[[SearchRequest, int, int], Body]
"""The store's kNN body: (request, size, depth) -> a ``_search`` body."""


@dataclass(frozen=True, slots=True)
class Leg:
    """One ranked list of a hybrid search: its body and its RRF weight."""

    kind: Literal["lexical", "knn"]
    body: Body
    weight: float


@dataclass(frozen=True, slots=True)
class HybridPlan:
    """The legs to send in one ``_msearch``, and whether the fused page needs a re-read."""

    legs: list[Leg]
    reread: bool


def knn_depth(request: SearchRequest, limit: int) -> int:
    """Candidates of a kNN search alone: at least ``limit``, at most the result window."""
    return min(max(request.candidates, limit), MAX_WINDOW)


def leg_depth(request: SearchRequest, limit: int) -> int:
    """Hits per hybrid leg: ``fusion_depth`` (else ``candidates``), at least ``limit``,
    at most the result window."""
    depth = request.fusion_depth or request.candidates
    return min(max(depth, limit), MAX_WINDOW)


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
            knn_body: the store's kNN body builder.
            knn_score: the vector field's raw kNN ``_score`` -> [0, 1] (its dialect's).
            group_field: the source field results collapse on, or None.
        """
        self._t = translator
        self._knn_body = knn_body
        self._knn_score = knn_score
        self._group = group_field

    def plan(self, request: SearchRequest, limit: int) -> HybridPlan:
        """The legs to run (both, unless exactly one weight is positive) and their shape."""
        depth = leg_depth(request, limit)
        # Passages: the legs read ids, and the fused page is re-read with its highlights,
        # so neither every candidate's content nor its highlighting is paid for.
        passages = self._t.passages is not None and bool(request.passage_text)
        reread = depth > INLINE_FACTOR * limit or passages
        lw, dw = request.lexical_weight, request.dense_weight
        both = (lw > 0) == (dw > 0)
        bodies: list[tuple[Literal["lexical", "knn"], Body, float]] = []
        if both or lw > 0:
            bodies.append(("lexical", self._t.lexical(request, depth), lw))
        if both or dw > 0:
            bodies.append(("knn", self._knn_body(request, depth, depth), dw))
        if reread:
            # Ids and scores only; the group too when results collapse across the legs.
            source: Body | bool = {"includes": [self._group]} if self._group else False
            for _, body, _ in bodies:
                body["_source"] = source
                if passages:
                    # The re-read highlights the page; search.highlight's single
                    # fragments come from the legs, which keep their clause.
                    body.pop("highlight", None)
        return HybridPlan([Leg(kind, body, w) for kind, body, w in bodies], reread)

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
            if leg.kind == "knn":
                hits = knn_hits(self._t, response, self._knn_score, request.with_vectors)
            else:
                hits = self._t.hits(response, with_vectors=request.with_vectors)
            ranked.append((hits, leg.weight))
        group = self._group
        return fuse(
            ranked,
            fusion=request.fusion,
            k=request.rrf_k,
            limit=limit,
            group_of=(lambda h: value_at(h.source, group)) if group else None,
        )


def knn_hits(
    translator: QueryTranslator,
    response: Mapping[str, Any],
    score: Callable[[float], float],
    with_vectors: bool,
) -> list[Hit]:
    """The hits of a kNN ``_search``, the engine's scores mapped into [0, 1] by ``score``."""
    hits = translator.hits(response, with_vectors=with_vectors)
    for h in hits:
        h.score = score(h.score) if h.score is not None else 0.0
    return hits


def reread_body(
    translator: QueryTranslator,
    hits: Sequence[Hit],
    flt: Filter,
    *,
    with_vectors: bool,
    passage_text: str | None = None,
) -> Body:
    """The documents of the fused top hits, under the request's filter (with their
    passages for ``passage_text`` where the store has them).

    Each hit is named by its index, routing and id: the same ``_id`` can be held
    once per routing value, and once per index behind an alias, by documents of
    different tenants. The filter (which carries the caller's scope) is applied
    again, so the re-read can never return what the legs could not.
    """
    body = translator.common(len(hits), with_vectors=with_vectors)
    body["query"] = {"bool": {"filter": [*translator.filter_clauses(flt), located(hits)]}}
    if translator.passages is not None and passage_text:
        body["highlight"] = translator.highlight(passage_text)
    return body


def located(hits: Sequence[Hit]) -> Body:
    """A clause matching exactly the documents the hits name (index, routing, id).

    One clause per (index, routing) pair, holding that pair's ids: a handful
    of clauses however many hits, far below the engines' clause limits.
    """
    groups: dict[tuple[str | None, str | None], list[str]] = {}
    for h in hits:
        groups.setdefault((h.index, h.routing), []).append(h.id)
    clauses: list[Body] = []
    for (index, routing), ids in groups.items():
        parts: list[Body] = [{"ids": {"values": ids}}]
        if index is not None:
            parts.append({"term": {"_index": index}})
        if routing is not None:
            parts.append({"term": {"_routing": routing}})
        else:
            parts.append({"bool": {"must_not": [{"exists": {"field": "_routing"}}]}})
        clauses.append({"bool": {"filter": parts}})
    return any_of(clauses)


def with_documents(hits: list[Hit], docs: Sequence[Hit]) -> list[Hit]:
    """The fused hits in their order, each given its re-read document; a hit whose
    document is gone (deleted between the two reads) is dropped."""
    by_identity = {d.identity: d for d in docs}
    out: list[Hit] = []
    for h in hits:
        doc = by_identity.get(h.identity)
        if doc is not None:
            h.source, h.vector, h.passages = doc.source, doc.vector, doc.passages
            out.append(h)
    return out


def msearch_lines(bodies: Sequence[Body]) -> list[Body]:
    """The ``_msearch`` payload: an empty header (the index is the request's) before each body."""
    lines: list[Body] = []
    for body in bodies:
        lines.extend(({}, body))
    return lines
