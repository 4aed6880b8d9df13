"""nDCG@10 and R@100 with ir-measures (pytrec_eval underneath).

A query the gateway answered with nothing scores 0 (pytrec_eval alone would
leave it out of the mean). Run scores are rank-derived (``limit - rank``), so
the evaluator sees exactly the gateway's order and its own tie-breaking
(by document id) never reorders equal scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

MEASURES = ("nDCG@10", "R@100")


def run_from_rankings(rankings: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """query id -> ranked doc ids  =>  a TREC-style run with strictly decreasing scores."""
    run: dict[str, dict[str, float]] = {}
    for qid, ranked in rankings.items():
        scores: dict[str, float] = {}
        for rank, doc in enumerate(ranked):
            scores.setdefault(doc, float(len(ranked) - rank))  # a repeated id keeps its best
        run[qid] = scores
    return run


def per_query(
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[str, Sequence[str]],
    query_ids: Sequence[str],
) -> dict[str, dict[str, float]]:
    """measure -> query id -> value, every one of ``query_ids`` (unanswered: 0)."""
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    wanted = set(query_ids)
    sub_qrels = {q: dict(qrels[q]) for q in query_ids}
    run = {q: s for q, s in run_from_rankings(rankings).items() if q in wanted and s}
    values = {m: dict.fromkeys(query_ids, 0.0) for m in MEASURES}
    for metric in ir_measures.iter_calc(measures, sub_qrels, run):
        values[str(metric.measure)][metric.query_id] = float(metric.value)
    return values


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[str, Sequence[str]],
    query_ids: Sequence[str],
) -> dict[str, float]:
    """Mean of each measure over ``query_ids`` (missing or empty answers count as 0)."""
    values = per_query(qrels, rankings, query_ids)
    n = len(query_ids)
    return {m: sum(values[m].values()) / n for m in MEASURES}
