"""Fusion methods compared offline on saved legs (``python -m bench.quality.legs``).

For every engine in the legs file, each method and parameter is applied to each
query's two legs, truncated to the depth the store asks at that limit (Lucene
hybrid legs: 2 x limit, at most 100; Qdrant: 100), and scored by nDCG@10:

- ``rrf``: weighted reciprocal rank fusion, ``w / (k + rank)`` per leg;
- ``minmax``, ``zscore``, ``dbsf``: a convex combination ``a * lexical + (1 - a) *
  dense`` of each leg's scores normalised over its own list (min-max; z-score;
  distribution-based, mean +- 3 standard deviations clipped into [0, 1]), or as the
  gateway scales them (``scaled``: lexical over its best, dense ``(1 + cos) / 2``); a
  document missing from a leg gets that leg's lowest normalised value.

    python -m bench.quality.fusion_study legs.json            # the grid, best per method
    python -m bench.quality.fusion_study legs.json --compare rrf:60:0.5 minmax:0.3

``--compare A B`` prints B - A per engine and limit with its paired-bootstrap 95 %
interval (``bench.quality.compare.bootstrap``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.quality.compare import bootstrap

Ranked = Sequence[Sequence[Any]]
"""(document id, score) best first."""
Fuse = Callable[[Ranked, Ranked], list[str]]

LIMITS = (10, 100)


def leg_depth(engine: str, limit: int) -> int:
    """The depth each leg is asked at ``limit``, at the stores' defaults."""
    return 100 if engine == "qdrant" else max(limit, min(2 * limit, 100))


def ndcg10(ranking: Sequence[str], rels: Mapping[str, int]) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sorted(rels.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _order(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: -scores[d])


def rrf(k: float, lexical_weight: float) -> Fuse:
    def fuse(lex: Ranked, dense: Ranked) -> list[str]:
        scores: dict[str, float] = {}
        for hits, w in ((lex, lexical_weight), (dense, 1.0 - lexical_weight)):
            for rank, (d, _) in enumerate(hits, start=1):
                scores[d] = scores.get(d, 0.0) + w / (k + rank)
        return _order(scores)

    return fuse


def minmax(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [(v - lo) / (hi - lo) if hi > lo else 1.0 for v in values]


def zscore(values: Sequence[float]) -> list[float]:
    if len(values) < 2:
        return [0.0 for _ in values]
    mean, sd = statistics.fmean(values), statistics.pstdev(values)
    return [(v - mean) / sd if sd > 0 else 0.0 for v in values]


def dbsf(values: Sequence[float]) -> list[float]:
    if len(values) < 2:
        return [1.0 for _ in values]
    mean, sd = statistics.fmean(values), statistics.pstdev(values)
    lo, hi = mean - 3 * sd, mean + 3 * sd
    return [min(1.0, max(0.0, (v - lo) / (hi - lo))) if hi > lo else 1.0 for v in values]


def scaled(values: Sequence[float]) -> list[float]:
    """The gateway's own scores as they are: lexical over its best, dense (1 + cos) / 2."""
    return [float(v) for v in values]


NORMS = {"minmax": minmax, "zscore": zscore, "dbsf": dbsf, "scaled": scaled}


def convex(norm: Callable[[Sequence[float]], list[float]], alpha: float) -> Fuse:
    def fuse(lex: Ranked, dense: Ranked) -> list[str]:
        scores: dict[str, float] = {}
        floors = []
        for hits, w in ((lex, alpha), (dense, 1.0 - alpha)):
            normed = norm([float(s) for _, s in hits]) if hits else []
            floors.append(w * min(normed, default=0.0))
            for (d, _), v in zip(hits, normed, strict=True):
                scores[d] = scores.get(d, 0.0) + w * v
        lex_ids = {d for d, _ in lex}
        dense_ids = {d for d, _ in dense}
        for d in scores:  # a document one leg did not return: that leg's floor
            if d not in lex_ids:
                scores[d] += floors[0]
            if d not in dense_ids:
                scores[d] += floors[1]
        return _order(scores)

    return fuse


def method(spec: str) -> Fuse:
    """``rrf:K:W`` (W: the lexical leg's share) or ``NORM:ALPHA``."""
    name, *params = spec.split(":")
    if name == "rrf":
        return rrf(float(params[0]), float(params[1]))
    return convex(NORMS[name], float(params[0]))


def grid() -> list[str]:
    specs = [f"rrf:{k}:{w}" for k in (5, 10, 20, 40, 60, 100) for w in (0.3, 0.4, 0.5, 0.6, 0.7)]
    alphas = [round(0.1 * i, 1) for i in range(1, 10)]
    specs += [f"{n}:{a}" for n in NORMS for a in alphas]
    return specs


def per_query(
    legs: Mapping[str, Any], qrels: Mapping[str, Any], spec: str, limit: int, engine: str
) -> dict[str, float]:
    fuse = method(spec)
    depth = leg_depth(engine, limit)
    out = {}
    for q, rels in qrels.items():
        lex = legs["bm25"].get(q, [])[:depth]
        dense = legs["dense"].get(q, [])[:depth]
        out[q] = ndcg10(fuse(lex, dense)[:limit], rels)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quality.fusion_study", description=__doc__)
    p.add_argument("legs", type=Path)
    p.add_argument("--compare", nargs=2, metavar=("A", "B"))
    p.add_argument("--top", type=int, default=3, help="best settings shown per method")
    args = p.parse_args(argv)
    data = json.loads(args.legs.read_text())
    qrels = data["qrels"]
    for engine, legs in data["engines"].items():
        for limit in LIMITS:
            if args.compare:
                a = per_query(legs, qrels, args.compare[0], limit, engine)
                b = per_query(legs, qrels, args.compare[1], limit, engine)
                diffs = [b[q] - a[q] for q in a]
                lo, hi = bootstrap(diffs)
                print(
                    f"{engine:13s} limit {limit:3d}  A {statistics.fmean(a.values()):.4f}  "
                    f"B {statistics.fmean(b.values()):.4f}  B-A {statistics.fmean(diffs):+.4f}  "
                    f"[{lo:+.4f}, {hi:+.4f}]"
                )
                continue
            results = {
                s: statistics.fmean(per_query(legs, qrels, s, limit, engine).values())
                for s in grid()
            }
            alone = {
                leg: statistics.fmean(
                    ndcg10([d for d, _ in legs[leg].get(q, [])], r) for q, r in qrels.items()
                )
                for leg in ("bm25", "dense")
            }
            print(
                f"{engine} limit {limit}: bm25 {alone['bm25']:.4f}, dense {alone['dense']:.4f}, "
                f"rrf:60:0.5 {results['rrf:60:0.5']:.4f}"
            )
            for family in ("rrf", *NORMS):
                best = sorted(
                    (s for s in results if s.startswith(family + ":")), key=lambda s: -results[s]
                )
                print("   ", "  ".join(f"{s} {results[s]:.4f}" for s in best[: args.top]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
