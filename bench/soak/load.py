"""The load: a fixed number of workers sending A2M calls, each under a hard deadline.

Every call is recorded with when it started (seconds from the load's start),
how long it took, its store, its kind and the verdict on the answer. A call
still unanswered at its deadline + 1 s is cancelled and counted as a hang: the
client never waits longer than that.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from bench.soak.outcome import HUNG, UNREACHABLE, Verdict, classify

HANG_GRACE_S = 1.0
LIMIT = 10
# The call mix: (kind, share). fetch-missing is a caller's error when the engine is up.
MIX: tuple[tuple[str, float], ...] = (
    ("recall-lexical", 0.5),
    ("recall-hybrid", 0.2),
    ("timeline", 0.1),
    ("fetch", 0.15),
    ("fetch-missing", 0.05),
)


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    vector: list[float]


@dataclass(frozen=True, slots=True)
class Call:
    store: str
    kind: str
    started: float
    elapsed: float
    verdict: Verdict


def params(kind: str, rng: random.Random, queries: Sequence[Query], keys: Sequence[str]) -> Any:
    """The params of one call of ``kind``, drawn from the queries and keys."""
    if kind == "recall-lexical":
        return {"query": rng.choice(queries).text, "limit": LIMIT}
    if kind == "recall-hybrid":
        q = rng.choice(queries)
        return {"query": q.text, "embedding": q.vector, "limit": LIMIT}
    if kind == "timeline":
        return {"limit": LIMIT}
    if kind == "fetch":
        return {"key": rng.choice(keys)}
    return {"key": f"scifact/missing-{rng.randrange(10**6)}"}


METHODS = {
    "recall-lexical": "memory/recall",
    "recall-hybrid": "memory/recall",
    "timeline": "memory/timeline",
    "fetch": "memory/fetch",
    "fetch-missing": "memory/fetch",
}


class Load:
    """Closed-loop workers against one gateway, until ``stop_at`` or ``max_requests``."""

    def __init__(
        self,
        base_url: str,
        stores: Sequence[str],
        queries: Sequence[Query],
        keys: Sequence[str],
        *,
        concurrency: int,
        deadline_s: float,
        max_requests: int | None,
        seed: int,
    ) -> None:
        self._base = base_url
        self._stores = list(stores)
        self._queries = queries
        self._keys = keys
        self._concurrency = concurrency
        self._deadline_s = deadline_s
        self._left = itertools.count() if max_requests is None else iter(range(max_requests))
        self._seed = seed
        self._ids = itertools.count(1)
        self.calls: list[Call] = []

    async def run(self, t0: float, stop_at: float) -> None:
        """Send calls until ``stop_at`` (monotonic) or the request cap."""
        limits = httpx.Limits(max_connections=self._concurrency, max_keepalive_connections=None)
        timeout = httpx.Timeout(self._deadline_s + HANG_GRACE_S + 5)
        async with httpx.AsyncClient(base_url=self._base, limits=limits, timeout=timeout) as c:
            await asyncio.gather(
                *(self._worker(c, i, t0, stop_at) for i in range(self._concurrency))
            )

    async def _worker(self, client: httpx.AsyncClient, n: int, t0: float, stop_at: float) -> None:
        rng = random.Random(self._seed * 1000 + n)
        kinds = [k for k, _ in MIX]
        weights = [w for _, w in MIX]
        while time.monotonic() < stop_at and next(self._left, None) is not None:
            kind = rng.choices(kinds, weights)[0]
            store = rng.choice(self._stores)
            started = time.monotonic()
            verdict = await self._call(
                client, store, kind, params(kind, rng, self._queries, self._keys)
            )
            self.calls.append(Call(store, kind, started - t0, time.monotonic() - started, verdict))

    async def _call(
        self, client: httpx.AsyncClient, store: str, kind: str, call_params: Any
    ) -> Verdict:
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": next(self._ids),
                "method": METHODS[kind],
                "params": call_params,
            }
        )
        try:
            async with asyncio.timeout(self._deadline_s + HANG_GRACE_S):
                resp = await client.post(
                    f"/a2m/{store}", content=body, headers={"content-type": "application/json"}
                )
        except TimeoutError:
            return HUNG
        except httpx.TransportError:
            return UNREACHABLE
        return classify(resp.status_code, resp.content)
