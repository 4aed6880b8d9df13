"""bench/pair_tally.py's arithmetic: summed CPU ratios, paired intervals, p50 and throughput
against direct, a slice with no tick."""

from __future__ import annotations

import math
import random
from functools import partial

from bench.pair_tally import Tally


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


def test_a_shared_way_is_drawn_at_the_same_slices_as_the_gateway() -> None:
    # Slice 1 is slow for both: paired draws keep gateway / floor at 1.25 in every draw,
    # where drawing each way's slices apart would spread it.
    t = tally(a2m=[0.0125, 0.125], mcp=[0.015, 0.15])
    t.cpu["floor"] = [0.01, 0.1]
    t.calls["floor"] = [100, 100]
    assert math.isclose(t.ratio(num="a2m", den="floor"), 1.25)
    low, high = t.interval(random.Random(4), figure=partial(t.ratio, num="a2m", den="floor"))
    assert math.isclose(low, 1.25)
    assert math.isclose(high, 1.25)


def test_added_p50_and_throughput_are_against_the_direct_way() -> None:
    t = Tally()
    t.add("a2m", 0.01, [0.002, 0.003, 0.004], wall=0.5)
    t.add("a2m", 0.01, [0.002, 0.003, 0.010], wall=0.5)
    t.add("direct", None, [0.001, 0.002, 0.003], wall=0.25)
    t.add("direct", None, [0.001, 0.002, 0.009], wall=0.5)
    assert "direct" not in t.cpu  # no server of its own: no CPU to count
    assert math.isclose(t.p50_ms("a2m"), 3.0)
    assert math.isclose(t.p50_ms("direct"), 2.0)
    assert math.isclose(t.added_p50_ms(), 1.0)
    assert math.isclose(t.throughput_ratio(), (6 / 1.0) / (6 / 0.75))
    assert math.isclose(t.added_p50_ms([1, 1]), 1.0)
    assert math.isclose(t.throughput_ratio([0]), 0.5)
