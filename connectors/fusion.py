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

from connectors.base import Fusion, Hit


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


Legs = Sequence[tuple[Sequence[Hit], float]]
"""Each ranked list (best first, its engine's scores) and its weight."""
Key = tuple[str | None, str | None, str]


def fuse(
    legs: Legs,
    *,
    fusion: Fusion,
    k: int,
    limit: int,
    group_of: Callable[[Hit], Any] | None = None,
) -> list[Hit]:
    """The lists fused by ``fusion``, best first, scores in [0, 1]; see :data:`Fusion`."""
    if fusion == "rrf":
        return fuse_rrf(legs, k=k, limit=limit, group_of=group_of)
    return fuse_scores(
        legs,
        normalise=NORMALISERS[fusion],
        limit=limit,
        group_of=group_of,
        to_unit=logistic if fusion == "zscore" else clamp01,
    )


def _weights(legs: Legs) -> list[float]:
    """The legs' weights; when every weight is 0 the lists count equally."""
    weights = [w for _, w in legs]
    return weights if any(w > 0 for w in weights) else [1.0] * len(legs)


def _merge(legs: Legs) -> dict[Key, Hit]:
    """One fresh hit per document over every list, in order of first appearance."""
    # Keyed by identity, not id: two documents may share an id (routing, aliases).
    fused: dict[Key, Hit] = {}
    for hits, _ in legs:
        for hit in hits:
            merged = fused.get(hit.identity)
            if merged is None:
                fused[hit.identity] = Hit(
                    id=hit.id,
                    source=hit.source,
                    vector=hit.vector,
                    highlight=hit.highlight,
                    index=hit.index,
                    routing=hit.routing,
                    anchors=hit.anchors,
                )
            else:
                # The same document from the other list: keep what either leg carried.
                merged.highlight = merged.highlight or hit.highlight
                merged.vector = merged.vector or hit.vector
                merged.anchors = merged.anchors or hit.anchors
    return fused


def _ranked(
    fused: dict[Key, Hit],
    scores: dict[Key, float],
    limit: int,
    group_of: Callable[[Hit], Any] | None,
) -> list[Hit]:
    """The best ``limit`` hits by score (ties in order of first appearance), one per group."""
    out: list[Hit] = []
    seen_groups: set[Any] = set()
    for hit in sorted(fused.values(), key=lambda h: -scores[h.identity]):
        if group_of is not None:
            group = group_of(hit)
            if group is not None:
                key = repr(group)
                if key in seen_groups:
                    continue
                seen_groups.add(key)
        hit.score = clamp01(scores[hit.identity])
        out.append(hit)
        if len(out) >= limit:
            break
    return out


def fuse_rrf(
    legs: Legs,
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
    weights = _weights(legs)
    best = sum(weights) / (k + 1)
    scores: dict[Key, float] = {}
    for (hits, _), weight in zip(legs, weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            scores[hit.identity] = scores.get(hit.identity, 0.0) + weight / (k + rank)
    scaled = {ident: score / best for ident, score in scores.items()}
    return _ranked(_merge(legs), scaled, limit, group_of)


def fuse_scores(
    legs: Legs,
    *,
    normalise: Callable[[Sequence[float]], list[float]],
    limit: int,
    group_of: Callable[[Hit], Any] | None = None,
    to_unit: Callable[[float], float] = clamp01,
) -> list[Hit]:
    """A convex combination of each list's normalised scores, best first, scores in [0, 1].

    Each list's scores are normalised over that list (``normalise``); a document scores
    ``sum(share x normalised)`` with ``share`` = weight / sum of weights, and a list that
    did not return it adds its lowest normalised score (its floor), so a document both
    lists rank well comes first and the scale of either engine's scores never matters.
    ``to_unit`` maps the combined value into [0, 1] (monotone: the order is kept). Ties
    keep the order of first appearance.
    """
    weights = _weights(legs)
    total = sum(weights)
    scores: dict[Key, float] = {}
    floors: list[tuple[float, set[Key]]] = []
    for (hits, _), weight in zip(legs, weights, strict=True):
        share = weight / total
        normed = normalise([h.score if h.score is not None else 0.0 for h in hits])
        floors.append((share * min(normed, default=0.0), {h.identity for h in hits}))
        for hit, value in zip(hits, normed, strict=True):
            scores[hit.identity] = scores.get(hit.identity, 0.0) + share * value
    fused = _merge(legs)
    for ident in fused:  # a list that did not return the document counts its floor
        scores[ident] += sum(floor for floor, returned in floors if ident not in returned)
    return _ranked(fused, {i: to_unit(v) for i, v in scores.items()}, limit, group_of)


def minmax(values: Sequence[float]) -> list[float]:
    """Scores mapped onto [0, 1] over their own range (all equal: all 1)."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if not (hi > lo and math.isfinite(hi - lo)):
        return [1.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def _spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (0 when there is no usable spread)."""
    mean = math.fsum(values) / len(values)
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return mean, spread if math.isfinite(spread) else 0.0


def zscore(values: Sequence[float]) -> list[float]:
    """Standard scores over the list (too short or flat to tell apart: all 0)."""
    if len(values) < 2:
        return [0.0 for _ in values]
    mean, spread = _spread(values)
    if spread <= 0:
        return [0.0 for _ in values]
    return [(v - mean) / spread for v in values]


def dbsf(values: Sequence[float]) -> list[float]:
    """Distribution-based: the mean +- 3 standard deviations mapped onto [0, 1], clipped."""
    if len(values) < 2:
        return [1.0 for _ in values]
    mean, spread = _spread(values)
    if spread <= 0:
        return [1.0 for _ in values]
    return [clamp01((v - mean + 3 * spread) / (6 * spread)) for v in values]


def logistic(x: float) -> float:
    """A combined z-score as a score in (0, 1): 0.5 at the lists' means."""
    if x < -700:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


NORMALISERS: dict[str, Callable[[Sequence[float]], list[float]]] = {
    "minmax": minmax,
    "zscore": zscore,
    "dbsf": dbsf,
}


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
