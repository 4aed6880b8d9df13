"""One Qdrant ranked request: the legs to send, the engine-neutral query, the scores back.

Pure: changes with Qdrant's query API (prefetch, RRF, named vectors) and its
score ranges, never with opening or reading. See :mod:`connectors.qdrant.connector` for
the rules (which legs, weights, fusion, score scaling).
"""

from __future__ import annotations

from typing import Any, Literal

from connectors.base import SearchRequest, SparseVector
from connectors.errors import EngineRejected
from connectors.fusion import cosine_score, l2_score, scale_by_max
from connectors.qdrant.engine import Nearest, Ranked, Rrf, WithPayload, WithVectors
from connectors.qdrant.layout import Layout
from connectors.qdrant.query import AllOf

Kind = Literal["sparse", "dense", "rrf"]


def check_legs(request: SearchRequest, layout: Layout) -> None:
    """A request asks only for legs the collection has.

    Raises:
        EngineRejected: text or a sparse vector without a sparse vector configured, or a
            dense vector the collection does not hold.
    """
    if (request.text is not None or request.sparse is not None) and layout.sparse_name is None:
        raise EngineRejected("this collection has no sparse vector for a lexical query")
    if request.dense is not None and not layout.has_dense:
        raise EngineRejected("this collection has no dense vector")


Leg = tuple[Kind, list[float] | SparseVector, str | None, float]
"""(kind, query vector, the collection's vector name, weight)."""


def legs(request: SearchRequest, sparse: SparseVector | None, layout: Layout) -> list[Leg]:
    """The legs to rank by; none when nothing can rank (a query of stopwords only)."""
    out: list[Leg] = []
    if sparse is not None and sparse.indices:
        out.append(("sparse", sparse, layout.sparse_name, request.lexical_weight))
    if request.dense is not None:
        dense = [float(x) for x in request.dense]
        out.append(("dense", dense, layout.dense_name, request.dense_weight))
    if len(out) == 2 and any(w > 0 for *_, w in out):
        out = [leg for leg in out if leg[3] > 0]  # weight 0: the leg cannot count
    return out


def ranked_query(
    request: SearchRequest,
    ranked_legs: list[Leg],
    qfilter: AllOf | None,
    *,
    limit: int,
    with_payload: WithPayload,
    with_vectors: WithVectors,
) -> tuple[Kind, Ranked]:
    """The query for one or two legs; two are prefetched under the same filter and fused."""
    if len(ranked_legs) == 1:
        kind, vector, using, _ = ranked_legs[0]
        query: Nearest | Rrf = Nearest(vector, using)
        prefetch: tuple[Nearest, ...] = ()
    else:
        kind = "rrf"
        prefetch = tuple(Nearest(v, name, request.candidates) for _, v, name, _ in ranked_legs)
        weights = [w for *_, w in ranked_legs]
        query = Rrf(k=request.rrf_k, weights=None if weights == [1.0, 1.0] else weights)
    ranked = Ranked(
        query=query,
        qfilter=qfilter,
        limit=limit,
        with_payload=with_payload,
        with_vectors=with_vectors,
        prefetch=prefetch,
    )
    return kind, ranked


def leg_requests(
    request: SearchRequest,
    ranked_legs: list[Leg],
    qfilter: AllOf | None,
    *,
    limit: int,
    with_payload: WithPayload,
    with_vectors: WithVectors,
) -> list[Ranked]:
    """One query per leg, for the gateway to fuse (``search.fusion`` other than rrf):
    each leg ``candidates`` deep (at least ``limit``), under the same filter."""
    return [
        Ranked(
            query=Nearest(vector, using),
            qfilter=qfilter,
            limit=max(limit, request.candidates),
            with_payload=with_payload,
            with_vectors=with_vectors,
        )
        for _, vector, using, _ in ranked_legs
    ]


def normalise(kind: Kind, layout: Layout, scores: list[float]) -> list[float]:
    """Scores into [0, 1], higher better."""
    if kind == "dense":
        score = l2_score if layout.metric == "l2" else cosine_score
        return [score(s) for s in scores]
    # Sparse (BM25-like) and RRF scores have no fixed range: scale by the best.
    return scale_by_max(scores)


def vector_of(vector: Any, layout: Layout) -> list[float] | None:
    """The dense vector of a point as read back (named or the default one)."""
    if isinstance(vector, dict):
        vector = vector.get(layout.dense_name or "")
    if isinstance(vector, list) and all(isinstance(x, int | float) for x in vector):
        return [float(x) for x in vector]
    return None
