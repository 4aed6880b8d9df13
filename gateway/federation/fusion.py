"""Merging members' ranked answers into one ranking (gateway.federation.federation's `fusion`).

Pure functions over wire records (``score`` in [0, 1], best first), so the
order can be recomputed from the members' own answers:

- :func:`merge_rrf`: weighted reciprocal rank fusion; every member's first hit
  scores alike, right for members holding different corpora;
- :func:`merge_by_score`: weight x member score; right when the scores mean the
  same thing on every member (dense: ``(1 + cosine) / 2`` on every engine);
- :func:`merge_calibrated`: each member's scores standardised over its own
  deep list (z-score), then merged; lexical scores are each member's own
  best-normalised BM25 (or sparse dot product on Qdrant), so only their shape
  over the list, not their scale, is comparable across shards of one corpus.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from connectors.base import Fusion, Hit
from connectors.fusion import fuse, fuse_rrf

Ranked = Sequence[tuple[Sequence[dict[str, Any]], float]]
"""Per member: its records (ids already federation-encoded, best first) and weight."""


def merge_rrf(ranked: Ranked, *, k: int, limit: int) -> list[dict[str, Any]]:
    """Weighted RRF; scaled so the top of the heaviest member's list scores 1."""
    legs = [([Hit(id=r["id"], source=r) for r in rs], w) for rs, w in ranked]
    fused = fuse_rrf(legs, k=k, limit=limit)
    weights = [w for _, w in ranked]
    if not any(w > 0 for w in weights):
        weights = [1.0] * len(weights)
    # fuse_rrf scales by a record that tops every list; ids are unique across members,
    # so the best a record can do is top the heaviest member's list.
    scale = sum(weights) / max(weights) if weights else 1.0
    return [
        {**(hit.source or {}), "score": round(min(1.0, (hit.score or 0.0) * scale), 6)}
        for hit in fused
    ]


def merge_by_score(ranked: Ranked, limit: int) -> list[dict[str, Any]]:
    """Records ordered by weight x member score, over the heaviest weight."""
    top = max((w for _, w in ranked), default=0.0) or 1.0
    scored = [
        (min(1.0, (w or 0.0) * (r.get("score") or 0.0) / top), i, r)
        for i, (rs, w) in enumerate(ranked)
        for r in rs
    ]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [{**r, "score": s} for s, _, r in scored[:limit]]


def standardise(scores: Sequence[float]) -> list[float]:
    """z-scores over one member's list; a list too short or flat to say more scores 0."""
    if len(scores) < 2:
        return [0.0] * len(scores)
    mean = statistics.fmean(scores)
    spread = statistics.pstdev(scores)
    if not math.isfinite(spread) or spread <= 0.0:
        return [0.0] * len(scores)
    return [(s - mean) / spread for s in scores]


def calibrated(ranked: Ranked, limit: int) -> list[tuple[float, dict[str, Any]]]:
    """(calibrated value, record), best first: each member's z-scores, weight-shifted.

    A weight w shifts a member's z-scores by ``log(w / heaviest)`` (0 for the heaviest;
    weight 0 ranks the member last).
    """
    top = max((w for _, w in ranked), default=0.0) or 1.0
    scored: list[tuple[float, int, dict[str, Any]]] = []
    for i, (rs, w) in enumerate(ranked):
        shift = math.log(w / top) if w > 0 else -math.inf
        zs = standardise([float(r.get("score") or 0.0) for r in rs])
        scored += [(z + shift, i, r) for z, r in zip(zs, rs, strict=True)]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [(c, r) for c, _, r in scored[:limit]]


def merge_calibrated(ranked: Ranked, limit: int) -> list[dict[str, Any]]:
    """Records ordered by their member-standardised score, weighted; scores in [0, 1].

    See :func:`calibrated`. The reported score is a logistic of the calibrated value:
    monotone, comparable across calls at the same depth.
    """
    return [{**r, "score": round(_logistic(c), 6)} for c, r in calibrated(ranked, limit)]


def fuse_legs(
    lexical: Sequence[dict[str, Any]],
    dense: Sequence[dict[str, Any]],
    *,
    fusion: Fusion,
    k: int,
    lexical_weight: float,
    dense_weight: float,
    limit: int,
) -> list[dict[str, Any]]:
    """Two merged legs fused as one store fuses its hybrid legs (same fusion, k, weights).

    Score fusions normalise each merged leg over its own list, as a store does over one
    index's leg: the lexical records' ``score`` should then be their calibrated value
    (:func:`calibrated`), an affine stand-in for one index's BM25, and the dense ones'
    their cosine score.
    """
    legs = [
        ([Hit(id=r["id"], source=r, score=r.get("score")) for r in lexical], lexical_weight),
        ([Hit(id=r["id"], source=r, score=r.get("score")) for r in dense], dense_weight),
    ]
    fused = fuse(legs, fusion=fusion, k=k, limit=limit)
    return [{**(hit.source or {}), "score": round(hit.score or 0.0, 6)} for hit in fused]


def _logistic(x: float) -> float:
    if x == -math.inf:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))
