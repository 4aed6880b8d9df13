"""The fault script: one fault at a time, per node, with healthy phases between.

Each phase is time-boxed and its boundaries are logged. A node "returns" when
its fault phase ends: the proxy relays again, or (kill) ``restart-one`` has
brought the node back to yellow; recovery is measured from that instant.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bench.soak.proxy import PASS, Fault, FaultProxy

Kind = Literal[
    "healthy", "kill", "slow", "429-retry-after", "429", "503-retry-after", "503", "drop"
]
FAULTS: tuple[Kind, ...] = (
    "kill",
    "slow",
    "429-retry-after",
    "429",
    "503-retry-after",
    "503",
    "drop",
)
REPO = Path(__file__).resolve().parents[2]
ENGINES_PY = REPO / "tests" / "engines" / "engines.py"
SHARED_HOME = Path.home() / ".cache" / "a2m-engines"


@dataclass(frozen=True, slots=True)
class Step:
    kind: Kind
    node: str | None
    seconds: float


@dataclass(slots=True)
class Phase:
    """A phase as it ran; times in seconds from the start of the load."""

    index: int
    kind: Kind
    node: str | None
    start: float
    end: float = 0.0
    proxy_counts: dict[str, Counter[str]] = field(default_factory=dict)
    """What each node's proxy saw during the phase."""
    breakers: dict[str, Counter[str]] = field(default_factory=dict)
    """Per store, its breaker's transitions during the phase (``"closed->open": 1``)."""
    cut: bool = False
    """Ended by the end of the load, not by its own clock."""

    @property
    def name(self) -> str:
        return self.kind if self.node is None else f"{self.kind} {self.node}"


def plan(
    nodes: Sequence[str],
    kinds: Sequence[Kind],
    *,
    fault_s: float,
    healthy_s: float,
    baseline_s: float,
) -> list[Step]:
    """Baseline, then for each node each fault kind followed by a healthy phase."""
    steps = [Step("healthy", None, baseline_s)]
    for node in nodes:
        for kind in kinds:
            steps += [Step(kind, node, fault_s), Step("healthy", None, healthy_s)]
    return steps


def fault_of(kind: Kind, slow_s: float) -> Fault:
    match kind:
        case "slow":
            return Fault("slow", delay_s=slow_s)
        case "drop":
            return Fault("drop")
        case "429-retry-after":
            return Fault("status", status=429, retry_after="1")
        case "429":
            return Fault("status", status=429)
        case "503-retry-after":
            return Fault("status", status=503, retry_after="1")
        case "503":
            return Fault("status", status=503)
    return PASS


class PrivateNodes:
    """kill / restart-one on the harness's own engine set, never the shared one."""

    def __init__(self, home: Path) -> None:
        if home.resolve() == SHARED_HOME.resolve():
            raise ValueError(f"{home} is the shared engines' home: the soak never kills those")
        self.home = home

    async def engines(self, *args: str) -> None:
        """Run ``engines.py`` against the private home.

        Raises:
            RuntimeError: it failed; the message ends with its stderr.
        """
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ENGINES_PY),
            *args,
            env={**os.environ, "A2M_ENGINES_HOME": str(self.home)},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"engines.py {' '.join(args)}: {err.decode()[-2000:]}")


Breakers = Callable[[], Awaitable[dict[str, Counter[str]]]]
"""The gateway's breaker transitions so far, per store (read from its /metrics)."""


async def _no_breakers() -> dict[str, Counter[str]]:
    return {}


class FaultScript:
    """Runs the steps against the proxies (and, for kill, the private nodes)."""

    def __init__(
        self,
        proxies: dict[str, FaultProxy],
        nodes: PrivateNodes | None,
        *,
        t0: float,
        slow_s: float,
        breakers: Breakers = _no_breakers,
    ) -> None:
        self._proxies = proxies
        self._breakers = breakers
        self._breakers_seen: dict[str, Counter[str]] | None = None
        self._nodes = nodes
        self._t0 = t0
        self._slow_s = slow_s
        self.phases: list[Phase] = []

    def _now(self) -> float:
        return time.monotonic() - self._t0

    def _log(self, text: str) -> None:
        print(f"[soak] t={self._now():7.1f}s {text}", file=sys.stderr, flush=True)

    def _snapshot(self) -> dict[str, Counter[str]]:
        return {n: Counter(p.counts) for n, p in self._proxies.items()}

    async def run(self, steps: Sequence[Step]) -> None:
        """Run every step in turn; cancelled, it ends the current phase and restores the proxies."""
        for i, step in enumerate(steps):
            phase = Phase(i, step.kind, step.node, self._now())
            self.phases.append(phase)
            before = self._snapshot()
            # The previous phase's closing read is this one's opening read.
            if self._breakers_seen is None:
                self._breakers_seen = await self._breakers()
            breakers_before = self._breakers_seen
            self._log(f"phase {i} begins: {phase.name} ({step.seconds:g} s)")
            try:
                await self._apply(step)
            except asyncio.CancelledError:
                phase.cut = True  # the load ended first: no recovery to measure
                raise
            finally:
                phase.end = self._now()
                after = self._snapshot()
                phase.proxy_counts = {n: after[n] - before[n] for n in after}
                if not phase.cut:
                    now = self._breakers_seen = await self._breakers()
                    phase.breakers = {s: now[s] - breakers_before.get(s, Counter()) for s in now}
                self._log(f"phase {i} ends: {phase.name}")

    async def _apply(self, step: Step) -> None:
        if step.node is None or step.kind == "healthy":
            await asyncio.sleep(step.seconds)
            return
        proxy = self._proxies[step.node]
        if step.kind == "kill":
            await self._kill(step, proxy)
            return
        proxy.fault = fault_of(step.kind, self._slow_s)
        try:
            await asyncio.sleep(step.seconds)
        finally:
            proxy.fault = PASS

    async def _kill(self, step: Step, proxy: FaultProxy) -> None:
        assert step.node is not None
        if self._nodes is None:  # a shared node: the proxy dies instead of the node
            await proxy.go_down()
            try:
                await asyncio.sleep(step.seconds)
            finally:
                await proxy.come_up()
            return
        await self._nodes.engines("kill", step.node)
        try:
            await asyncio.sleep(step.seconds)
        finally:
            self._log(f"restarting {step.node}")
            # Shielded: the node comes back even when the run is cut short here.
            await asyncio.shield(self._nodes.engines("restart-one", step.node))
