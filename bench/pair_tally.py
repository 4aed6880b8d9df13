"""Interleaved slices, tallied: per way and slice, the server's CPU seconds, the calls,
the wall seconds and each call's latency, and the figures a paired run compares.

Every way runs in every slice, so a figure's bootstrap draws the same slices for all
ways: the load a slice met falls on both sides of a ratio alike.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench.latency.report import percentile

WAYS = ("a2m", "mcp")
"""The two doors of a gateway, tallied from the start."""

Picks = Sequence[int] | None


@dataclass
class Tally:
    """One gateway at one concurrency, per way and slice: server CPU seconds, calls, wall
    seconds and each call's latency. A way with no server of its own (direct) has no CPU."""

    cpu: dict[str, list[float]] = field(default_factory=lambda: {w: [] for w in WAYS})
    calls: dict[str, list[int]] = field(default_factory=lambda: {w: [] for w in WAYS})
    wall: dict[str, list[float]] = field(default_factory=dict)
    latencies: dict[str, list[list[float]]] = field(default_factory=dict)

    def add(self, way: str, cpu: float | None, latencies: list[float], wall: float) -> None:
        if cpu is not None:
            self.cpu.setdefault(way, []).append(cpu)
        self.calls.setdefault(way, []).append(len(latencies))
        self.wall.setdefault(way, []).append(wall)
        self.latencies.setdefault(way, []).append(latencies)

    def _picks(self, way: str, picks: Picks) -> Sequence[int]:
        return range(len(self.calls[way])) if picks is None else picks

    def per_call_ms(self, way: str, picks: Picks = None) -> float:
        idx = self._picks(way, picks)
        return 1000 * sum(self.cpu[way][i] for i in idx) / sum(self.calls[way][i] for i in idx)

    def ratio(self, picks: Picks = None, num: str = "mcp", den: str = "a2m") -> float:
        """``num`` / ``den`` CPU per call (default MCP / A2M); NaN when the ``den`` slices
        took no /proc tick at all."""
        low = self.per_call_ms(den, picks)
        return self.per_call_ms(num, picks) / low if low > 0 else math.nan

    def p50_ms(self, way: str, picks: Picks = None) -> float:
        idx = self._picks(way, picks)
        return percentile([x for i in idx for x in self.latencies[way][i]], 50)

    def added_p50_ms(self, picks: Picks = None, way: str = "a2m") -> float:
        """The way's p50 less the direct engine search's, over the same slices."""
        return self.p50_ms(way, picks) - self.p50_ms("direct", picks)

    def throughput(self, way: str, picks: Picks = None) -> float:
        idx = self._picks(way, picks)
        return sum(self.calls[way][i] for i in idx) / sum(self.wall[way][i] for i in idx)

    def throughput_ratio(self, picks: Picks = None, way: str = "a2m") -> float:
        """The way's calls per second over direct searches per second, over the same slices."""
        return self.throughput(way, picks) / self.throughput("direct", picks)

    def interval(
        self,
        rng: random.Random,
        draws: int = 2000,
        figure: Callable[[Picks], float] | None = None,
    ) -> tuple[float, float]:
        """The 2.5th and 97.5th percentiles of ``figure`` (default: the CPU ratio) over
        slices drawn with replacement; every way is drawn at the same slices."""
        n = len(self.cpu["a2m"])
        of = figure or self.ratio
        drawn = (of([rng.randrange(n) for _ in range(n)]) for _ in range(draws))
        values = sorted(v for v in drawn if math.isfinite(v))
        if not values:
            return math.nan, math.nan
        return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]
