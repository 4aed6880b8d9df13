"""The federation's merges on hand-made member answers (engine-independent code)."""

from __future__ import annotations

from gateway.a2m.records import Record
from gateway.federation.fusion import fuse_legs, merge_calibrated, standardise


def recs(member: str, scores: list[float]) -> list[Record]:
    return [Record(id=f"{member}:{i}", score=s) for i, s in enumerate(scores)]


def test_calibration_ignores_each_members_own_scale() -> None:
    # Same shape, different scale (each member divides by its own best): interleaved.
    a = recs("a", [1.0, 0.8, 0.6, 0.4])
    b = recs("b", [1.0, 0.9, 0.8, 0.7])  # evenly spaced too: the same z-scores as a
    merged = merge_calibrated([(a, 1.0), (b, 1.0)], 4)
    assert [r.id for r in merged] == ["a:0", "b:0", "a:1", "b:1"]
    scores = [r.score for r in merged if r.score is not None]
    assert len(scores) == len(merged)
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 < s < 1.0 for s in scores)


def test_flat_or_single_lists_and_zero_weights() -> None:
    assert standardise([0.5]) == [0.0]
    assert standardise([0.7, 0.7, 0.7]) == [0.0, 0.0, 0.0]
    merged = merge_calibrated([(recs("a", [1.0, 0.5]), 0.0), (recs("b", [1.0, 0.5]), 1.0)], 4)
    assert [r.id for r in merged][-2:] == ["a:0", "a:1"]
    assert [r.score for r in merged][-2:] == [0.0, 0.0]
    assert merge_calibrated([], 5) == []


def test_merged_legs_fuse_as_one_stores_hybrid() -> None:
    lexical = recs("a", [1.0, 0.5]) + recs("b", [0.4])
    dense = [lexical[2], lexical[0]]
    fused = fuse_legs(
        lexical, dense, fusion="rrf", k=60, lexical_weight=1.0, dense_weight=1.0, limit=3
    )
    # a:0 is 1st lexically and 2nd densely; b:0 3rd and 1st; a:1 only 2nd lexically.
    assert [r.id for r in fused] == ["a:0", "b:0", "a:1"]
    assert fused[0].score == round((1 / 61 + 1 / 62) / (2 / 61), 6)
