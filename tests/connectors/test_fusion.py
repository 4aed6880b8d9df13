"""The shared score helpers every connector reports through (unit: no engine involved)."""

from __future__ import annotations

import math

import pytest

from connectors.base import Hit
from connectors.fusion import (
    cosine_score,
    dbsf,
    fuse,
    fuse_rrf,
    l2_score,
    minmax,
    scale_by_max,
    zscore,
)


def test_scale_by_max_puts_the_best_at_one_and_keeps_ratios() -> None:
    assert scale_by_max([4.0, 2.0, 1.0]) == [1.0, 0.5, 0.25]


@pytest.mark.parametrize("scores", [[], [0.0, 0.0], [-1.0, -2.0], [math.inf, 1.0], [math.nan]])
def test_scale_by_max_without_a_usable_best_is_all_zero(scores: list[float]) -> None:
    assert scale_by_max(scores) == [0.0] * len(scores)


def test_cosine_score_maps_the_similarity_range_onto_zero_one() -> None:
    assert [cosine_score(s) for s in (-1.0, 0.0, 1.0)] == [0.0, 0.5, 1.0]
    assert cosine_score(1.5) == 1.0  # float noise above 1 is clamped


def test_l2_score_is_one_at_distance_zero_and_falls_with_distance() -> None:
    assert l2_score(0.0) == 1.0
    assert l2_score(1.0) == 0.5
    assert l2_score(3.0) < l2_score(1.0)
    assert l2_score(-0.1) == 1.0  # a rounding-negative distance is distance 0


def _hits(*scored: tuple[str, float]) -> list[Hit]:
    return [Hit(id=i, source={"id": i}, score=s) for i, s in scored]


def test_minmax_maps_a_list_onto_its_own_range() -> None:
    assert minmax([10.0, 6.0, 2.0]) == [1.0, 0.5, 0.0]
    assert minmax([3.0, 3.0]) == [1.0, 1.0]  # nothing to tell apart: all at the top
    assert minmax([]) == []


def test_zscore_standardises_and_dbsf_maps_three_deviations_onto_zero_one() -> None:
    assert zscore([3.0, 1.0]) == [1.0, -1.0]
    assert zscore([2.0]) == [0.0]
    assert zscore([5.0, 5.0]) == [0.0, 0.0]
    out = dbsf([9.0, 4.0, 3.5, 1.0])
    assert out == sorted(out, reverse=True)
    assert all(0.0 <= v <= 1.0 for v in out)
    assert dbsf([1.0, 1.0]) == [1.0, 1.0]


def test_zscore_fusion_reports_the_combined_value_through_a_logistic() -> None:
    lexical = _hits(("a", 3.0), ("b", 1.0))  # z: +1, -1
    dense = _hits(("b", 0.9), ("a", 0.1))  # z: +1, -1
    fused = fuse([(lexical, 3.0), (dense, 1.0)], fusion="zscore", k=60, limit=2)
    # a: 0.75 * 1 + 0.25 * -1 = 0.5; b: -0.5
    assert [h.id for h in fused] == ["a", "b"]
    assert fused[0].score == pytest.approx(1 / (1 + math.exp(-0.5)))
    assert fused[1].score == pytest.approx(1 / (1 + math.exp(0.5)))


def test_score_fusion_ignores_each_engines_scale() -> None:
    # BM25 in the tens, cosines near 1: only each list's shape counts.
    lexical = _hits(("a", 30.0), ("b", 20.0), ("c", 10.0))
    dense = _hits(("c", 0.95), ("b", 0.94), ("a", 0.90))
    fused = fuse([(lexical, 1.0), (dense, 1.0)], fusion="minmax", k=60, limit=3)
    # a: 0.5*1 + 0.5*0; b: 0.5*0.5 + 0.5*0.8; c: 0.5*0 + 0.5*1
    assert [h.id for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(0.65)
    rescaled = [(_hits(*((h.id, (h.score or 0) * 1000) for h in lexical)), 1.0), (dense, 1.0)]
    assert [h.id for h in fuse(rescaled, fusion="minmax", k=60, limit=3)] == ["b", "a", "c"]


def test_score_fusion_weights_are_shares_of_their_sum() -> None:
    lexical = _hits(("a", 2.0), ("b", 1.0))
    dense = _hits(("b", 0.9), ("a", 0.1))
    assert fuse([(lexical, 3.0), (dense, 1.0)], fusion="minmax", k=60, limit=1)[0].id == "a"
    assert fuse([(lexical, 1.0), (dense, 3.0)], fusion="minmax", k=60, limit=1)[0].id == "b"
    # Every weight 0: the lists count equally, as under RRF.
    tied = fuse([(lexical, 0.0), (dense, 0.0)], fusion="minmax", k=60, limit=2)
    assert [h.score for h in tied] == [0.5, 0.5]


def test_a_document_one_list_missed_gets_that_lists_floor() -> None:
    lexical = _hits(("a", 5.0), ("b", 1.0))
    dense = _hits(("c", 0.9), ("d", 0.8))
    fused = fuse([(lexical, 1.0), (dense, 1.0)], fusion="minmax", k=60, limit=4)
    by_id = {h.id: h.score for h in fused}
    assert by_id == {"a": 0.5, "c": 0.5, "b": 0.0, "d": 0.0}
    assert [h.id for h in fused] == ["a", "c", "b", "d"]  # ties: order of first appearance


def test_score_fusion_collapses_groups_and_stops_at_the_limit() -> None:
    lexical = [Hit(id=i, source={"g": g}, score=s) for i, g, s in (("a", 1, 3.0), ("b", 1, 2.0))]
    dense = [Hit(id="c", source={"g": 2}, score=0.5)]
    fused = fuse(
        [(lexical, 1.0), (dense, 1.0)],
        fusion="zscore",
        k=60,
        limit=5,
        group_of=lambda h: h.source["g"],
    )
    assert [h.id for h in fused] == ["a", "c"]
    assert len(fuse([(lexical, 1.0), (dense, 1.0)], fusion="dbsf", k=60, limit=1)) == 1


def test_fuse_rrf_is_what_fusion_rrf_runs() -> None:
    lexical = _hits(("a", 9.0), ("b", 1.0))
    dense = _hits(("b", 0.9), ("c", 0.1))
    legs = [(lexical, 1.0), (dense, 1.0)]
    via_fuse = fuse(legs, fusion="rrf", k=60, limit=3)
    direct = fuse_rrf(
        [(_hits(("a", 9.0), ("b", 1.0)), 1.0), (_hits(("b", 0.9), ("c", 0.1)), 1.0)],
        k=60,
        limit=3,
    )
    assert [(h.id, h.score) for h in via_fuse] == [(h.id, h.score) for h in direct]
    assert via_fuse[0].id == "b"
