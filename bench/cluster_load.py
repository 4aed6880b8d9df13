"""The load and the figures of ``bench.cluster_failover``: recall and timeline calls, /readyz.

Closed-loop workers send lexical recall, hybrid recall (the query's own vector) and
timeline calls; every call is bounded by the deadline + 1 s on the client side (a call
still unanswered then is a hang, and a failure). A sampler asks /readyz every 0.25 s and
keeps its status and the breakers it reports as not closed.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import orjson

from bench.soak.outcome import HUNG, UNREACHABLE, Verdict, classify
from tests.support.scifact import SciFact

MIX: tuple[tuple[str, float], ...] = (
    ("recall-lexical", 0.5),
    ("recall-hybrid", 0.3),
    ("timeline", 0.2),
)
LIMIT = 10
HANG_GRACE_S = 1.0
READY_EVERY_S = 0.25


@dataclass(frozen=True, slots=True)
class Call:
    kind: str
    started: float
    elapsed: float
    verdict: Verdict


@dataclass
class Phase:
    name: str
    member: str | None
    start: float
    end: float = 0.0
    note: str = ""


@dataclass
class Load:
    base_url: str
    sf: SciFact
    concurrency: int
    deadline_s: float
    calls: list[Call] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _params(self, kind: str, rng: random.Random) -> tuple[str, dict[str, Any]]:
        if kind == "timeline":
            return "memory/timeline", {"limit": LIMIT}
        q = rng.choice(self.sf.query_ids)
        params: dict[str, Any] = {"query": self.sf.queries[q], "limit": LIMIT}
        if kind == "recall-hybrid":
            params["embedding"] = self.sf.query_vector(q)
        return "memory/recall", params

    async def run(self, t0: float, stop: asyncio.Event) -> None:
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=None)
        timeout = httpx.Timeout(self.deadline_s + HANG_GRACE_S + 5)
        async with httpx.AsyncClient(base_url=self.base_url, limits=limits, timeout=timeout) as c:
            await asyncio.gather(*(self._worker(c, n, t0, stop) for n in range(self.concurrency)))

    async def _worker(
        self, client: httpx.AsyncClient, n: int, t0: float, stop: asyncio.Event
    ) -> None:
        rng = random.Random(21_000 + n)
        kinds, weights = [k for k, _ in MIX], [w for _, w in MIX]
        while not stop.is_set():
            kind = rng.choices(kinds, weights)[0]
            method, params = self._params(kind, rng)
            started = time.monotonic()
            verdict = await self._call(client, method, params)
            self.calls.append(Call(kind, started - t0, time.monotonic() - started, verdict))

    async def _call(self, client: httpx.AsyncClient, method: str, params: Any) -> Verdict:
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        )
        try:
            async with asyncio.timeout(self.deadline_s + HANG_GRACE_S):
                resp = await client.post(
                    "/a2m/sf", content=body, headers={"content-type": "application/json"}
                )
        except TimeoutError:
            return HUNG
        except httpx.TransportError:
            return UNREACHABLE
        return classify(resp.status_code, resp.content)


async def sample_ready(
    base_url: str, t0: float, out: list[tuple[float, int, dict[str, str]]], stop: asyncio.Event
) -> None:
    """Every 0.25 s: /readyz's status and the breakers it names (only the not-closed ones)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10.0) as client:
        while not stop.is_set():
            at = time.monotonic() - t0
            try:
                resp = await client.get("/readyz")
                breakers = resp.json().get("breakers") or {}
                out.append((at, resp.status_code, dict(breakers)))
            except (httpx.HTTPError, ValueError):
                out.append((at, 0, {}))
            await asyncio.sleep(READY_EVERY_S)


def _ms(values: Sequence[float], q: float) -> float | None:
    return round(float(np.quantile(values, q)) * 1000, 1) if values else None


def phase_rows(
    phases: Sequence[Phase],
    calls: Sequence[Call],
    ready: Sequence[tuple[float, int, dict[str, str]]],
) -> list[dict[str, Any]]:
    """One row of figures per phase (calls are counted in the phase they started in)."""
    rows = []
    for p in phases:
        inside = [c for c in calls if p.start <= c.started < p.end]
        samples = [r for r in ready if p.start <= r[0] < p.end]
        elapsed = [c.elapsed for c in inside]
        failed = [c for c in inside if not c.verdict.ok]
        rows.append(
            {
                "phase": p.name,
                "member": p.member,
                "seconds": round(p.end - p.start, 1),
                "calls": len(inside),
                "failed": len(failed),
                "failed_kinds": sorted({f"{c.kind}: {c.verdict.label}" for c in failed}),
                "p50_ms": _ms(elapsed, 0.5),
                "p99_ms": _ms(elapsed, 0.99),
                "max_ms": round(max(elapsed) * 1000, 1) if elapsed else None,
                "ready_samples": len(samples),
                "not_ready": sum(1 for s in samples if s[1] != 200),
                "breaker_open": sum(1 for s in samples if s[2]),
                "note": p.note,
            }
        )
    return rows
