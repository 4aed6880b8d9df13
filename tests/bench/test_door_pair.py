"""bench/door_pair.py's arithmetic: the ratio of summed CPU, its interval, a slice with no tick."""

from __future__ import annotations

import math
import random

from bench.door_pair import Tally


def tally(a2m: list[float], mcp: list[float], calls: int = 100) -> Tally:
    t = Tally()
    t.cpu = {"a2m": a2m, "mcp": mcp}
    t.calls = {"a2m": [calls] * len(a2m), "mcp": [calls] * len(mcp)}
    return t


def test_the_ratio_is_of_the_sums_not_the_mean_of_slice_ratios() -> None:
    # Slice ratios 2.0 and 1.0 average 1.5; the sums say (0.02 + 0.03) / (0.01 + 0.03).
    t = tally(a2m=[0.01, 0.03], mcp=[0.02, 0.03])
    assert t.per_call_ms("a2m") == 1000 * 0.04 / 200
    assert math.isclose(t.ratio(), 0.05 / 0.04)


def test_the_interval_brackets_the_ratio_and_narrows_with_agreeing_slices() -> None:
    rng = random.Random(3)
    noisy = tally(
        a2m=[0.01 * (1 + i % 5) for i in range(40)], mcp=[0.013 * (5 - i % 5) for i in range(40)]
    )
    low, high = noisy.interval(random.Random(1))
    assert low <= noisy.ratio() <= high
    steady = tally(a2m=[0.01] * 40, mcp=[0.013] * 40)
    s_low, s_high = steady.interval(rng)
    assert math.isclose(s_low, 1.3)
    assert math.isclose(s_high, 1.3)
    assert high - low > 0.1


def test_slices_that_took_no_tick_give_no_ratio_rather_than_an_error() -> None:
    t = tally(a2m=[0.0, 0.0], mcp=[0.01, 0.0])
    assert math.isnan(t.ratio())
    low, high = t.interval(random.Random(2))
    assert math.isnan(low)
    assert math.isnan(high)
    some = tally(a2m=[0.0, 0.01], mcp=[0.01, 0.01])
    low, high = some.interval(random.Random(2))  # draws of only the empty slice are left out
    assert math.isfinite(low)
    assert math.isfinite(high)
