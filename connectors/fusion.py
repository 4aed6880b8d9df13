"""Engine-neutral scores and fusion: every connector reports scores in [0, 1] through these.

Hybrid search on Elasticsearch/OpenSearch fuses a lexical and a kNN result list
in the gateway by weighted reciprocal rank fusion, so it works on every engine
version and licence (no ``rank``/``retriever``, no search pipeline). Qdrant
fuses on the server; its scores are scaled here the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from connectors.base import Hit


def normalise_by_max(hits: list[Hit]) -> list[Hit]:
    """BM25 scores have no upper bound: divide by the result's best so the top hit scores 1."""
    top = max((h.score for h in hits if h.score is not None), default=0.0)
    for h in hits:
        h.score = (h.score / top) if (h.score is not None and top > 0) else 0.0
    return hits


def clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def inner_product_score(raw: float) -> float:
    """Map Lucene's max-inner-product score back to a [0, 1] score like cosine's.

    Lucene scores a dot product d as ``d + 1`` when d >= 0 and ``1 / (1 - d)``
    otherwise (always positive, unbounded). Recover d and report ``(1 + d) / 2``,
    exact for unit vectors and clamped for longer ones; the order is preserved.
    """
    dot = raw - 1.0 if raw >= 1.0 else 1.0 - 1.0 / raw if raw > 0 else -1.0
    return clamp01((1.0 + dot) / 2.0)


def fuse_rrf(
    legs: Sequence[tuple[Sequence[Hit], float]],
    *,
    k: int,
    limit: int,
    group_of: Callable[[Hit], Any] | None = None,
) -> list[Hit]:
    """Weighted reciprocal rank fusion of ranked lists, best first, scores in [0, 1].

    A document scores ``sum(weight / (k + rank))`` over the lists it appears in
    (rank from 1), divided by the best possible score ``sum(weights) / (k + 1)``
    (first in every list). Ties keep the order of first appearance. When every
    weight is 0 the lists count equally. With ``group_of``, only the best
    document of each group is kept (collapse across the two lists).
    """
    weights = [w for _, w in legs]
    if not any(w > 0 for w in weights):
        weights = [1.0] * len(legs)
    best = sum(weights) / (k + 1)
    # Keyed by identity, not id: two documents may share an id (routing, aliases).
    Key = tuple[str | None, str | None, str]
    fused: dict[Key, Hit] = {}
    scores: dict[Key, float] = {}
    for (hits, _), weight in zip(legs, weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            ident = hit.identity
            scores[ident] = scores.get(ident, 0.0) + weight / (k + rank)
            merged = fused.get(ident)
            if merged is None:
                fused[ident] = Hit(
                    id=hit.id,
                    source=hit.source,
                    vector=hit.vector,
                    highlight=hit.highlight,
                    index=hit.index,
                    routing=hit.routing,
                )
            else:
                # The same document from the other list: keep what either leg carried.
                merged.highlight = merged.highlight or hit.highlight
                merged.vector = merged.vector or hit.vector
    ranked = sorted(fused.values(), key=lambda h: -scores[h.identity])
    out: list[Hit] = []
    seen_groups: set[Any] = set()
    for hit in ranked:
        if group_of is not None:
            group = group_of(hit)
            if group is not None:
                key = repr(group)
                if key in seen_groups:
                    continue
                seen_groups.add(key)
        hit.score = clamp01(scores[hit.identity] / best)
        out.append(hit)
        if len(out) >= limit:
            break
    return out


def scale_by_max(scores: Sequence[float]) -> list[float]:
    """Unbounded scores (BM25-like, sparse, RRF) divided by the best: the top scores 1."""
    top = max(scores, default=0.0)
    if top <= 0 or not math.isfinite(top):
        return [0.0 for _ in scores]
    return [clamp01(s / top) for s in scores]


def cosine_score(raw: float) -> float:
    """A cosine similarity in [-1, 1] as a score in [0, 1]."""
    return clamp01((raw + 1.0) / 2.0)


def l2_score(distance: float) -> float:
    """A Euclidean distance as a score in (0, 1]: 1 at distance 0."""
    return 1.0 / (1.0 + max(0.0, distance))
