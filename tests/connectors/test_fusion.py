"""The shared score helpers every connector reports through (unit: no engine involved)."""

from __future__ import annotations

import math

import pytest

from connectors.fusion import cosine_score, l2_score, scale_by_max


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
