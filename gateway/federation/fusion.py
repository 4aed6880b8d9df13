"""Merging members' ranked answers into one ranking (gateway.federation.federation's `fusion`).

Functions over the members' records (``score`` in [0, 1], best first), so the
order can be recomputed from the members' own answers; each sets the merged
records' scores:

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

from connectors.base import Fusion, Hit
from connectors.fusion import clamp01, fuse
from gateway.a2m.records import Record

Ranked = Sequence[tuple[Sequence[Record], float]]
"""Per member: its records (ids already federation-encoded, best first) and weight."""


def merge_rrf(ranked: Ranked, *, k: int, limit: int) -> list[Record]:
    """Weighted RRF, scaled so the top of the heaviest member's list scores 1.

    A record scores ``weight / (k + rank)`` in its member's list (each appears in one
    list). Ties keep the members' order.
    """
    weights = [w for _, w in ranked]
    if not any(w > 0 for w in weights):
        weights = [1.0] * len(weights)
    if not weights:
        return []
    best = sum(weights) / (k + 1)
    # Scaled by a record that tops every list, then by how far the heaviest list's top
    # is from that: ids are unique across members, so that is the best a record does.
    scale = sum(weights) / max(weights)
    scored = [
        (w / (k + rank), r)
        for (rs, _), w in zip(ranked, weights, strict=True)
        for rank, r in enumerate(rs, start=1)
    ]
    scored.sort(key=lambda t: -t[0])
    out = scored[:limit]
    for score, r in out:
        r.score = round(min(1.0, clamp01(score / best) * scale), 6)
    return [r for _, r in out]


def merge_by_score(ranked: Ranked, limit: int) -> list[Record]:
    """Records ordered by weight x member score, over the heaviest weight."""
    top = max((w for _, w in ranked), default=0.0) or 1.0
    scored = [
        (min(1.0, (w or 0.0) * (r.score or 0.0) / top), i, r)
        for i, (rs, w) in enumerate(ranked)
        for r in rs
    ]
    scored.sort(key=lambda t: (-t[0], t[1]))
    out = scored[:limit]
    for s, _, r in out:
        r.score = s
    return [r for _, _, r in out]


def standardise(scores: Sequence[float]) -> list[float]:
    """z-scores over one member's list; a list too short or flat to say more scores 0."""
    if len(scores) < 2:
        return [0.0] * len(scores)
    mean = statistics.fmean(scores)
    spread = statistics.pstdev(scores)
    if not math.isfinite(spread) or spread <= 0.0:
        return [0.0] * len(scores)
    return [(s - mean) / spread for s in scores]


def calibrated(ranked: Ranked, limit: int) -> list[tuple[float, Record]]:
    """(calibrated value, record), best first: each member's z-scores, weight-shifted.

    A weight w shifts a member's z-scores by ``log(w / heaviest)`` (0 for the heaviest;
    weight 0 ranks the member last).
    """
    top = max((w for _, w in ranked), default=0.0) or 1.0
    scored: list[tuple[float, int, Record]] = []
    for i, (rs, w) in enumerate(ranked):
        shift = math.log(w / top) if w > 0 else -math.inf
        zs = standardise([float(r.score or 0.0) for r in rs])
        scored += [(z + shift, i, r) for z, r in zip(zs, rs, strict=True)]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [(c, r) for c, _, r in scored[:limit]]


def merge_calibrated(ranked: Ranked, limit: int) -> list[Record]:
    """Records ordered by their member-standardised score, weighted; scores in [0, 1].

    See :func:`calibrated`. The reported score is a logistic of the calibrated value:
    monotone, comparable across calls at the same depth.
    """
    out = calibrated(ranked, limit)
    for c, r in out:
        r.score = round(_logistic(c), 6)
    return [r for _, r in out]


def fuse_legs(
    lexical: Sequence[Record],
    dense: Sequence[Record],
    *,
    fusion: Fusion,
    k: int,
    lexical_weight: float,
    dense_weight: float,
    limit: int,
) -> list[Record]:
    """Two merged legs fused as one store fuses its hybrid legs (same fusion, k, weights).

    Score fusions normalise each merged leg over its own list, as a store does over one
    index's leg: the lexical records' ``score`` should then be their calibrated value
    (:func:`calibrated`), an affine stand-in for one index's BM25, and the dense ones'
    their cosine score.
    """
    # The engine-neutral fusion ranks by id; the records are found again by theirs.
    by_id: dict[str, Record] = {}
    for r in (*lexical, *dense):
        by_id.setdefault(r.id, r)
    legs = [
        ([Hit(id=r.id, source={}, score=r.score) for r in lexical], lexical_weight),
        ([Hit(id=r.id, source={}, score=r.score) for r in dense], dense_weight),
    ]
    out = []
    for hit in fuse(legs, fusion=fusion, k=k, limit=limit):
        record = by_id[hit.id]
        record.score = round(hit.score or 0.0, 6)
        out.append(record)
    return out


def _logistic(x: float) -> float:
    if x == -math.inf:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))
