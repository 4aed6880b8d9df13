"""Engine pages -> records: every engine call a Store makes, timed, refilled, off the loop.

What changes together here is how a store reads from its connector: the `where`
refill loop (the engine only approximates `where`, so a read that lost records
to the exact check asks again for more, x4 each time, up to the store's
`limits.max_where_candidates`), the
observers timing each engine call (metrics), the store's guard (circuit breaker and
in-flight limit) around each, and moving the mapping of a large page off the event
loop. The planner decides what to ask (a ReadPlan); this asks it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Final, TypeVar

from connectors.base import Connector, Hit
from gateway.a2m.records import Record
from gateway.resilience import EngineGuard
from gateway.store.planner import ReadPlan
from gateway.store.shaper import ResultShaper

T = TypeVar("T")

EngineObserver = Callable[[str, str, float, str | None], None]
"""(store, operation, seconds, error kind or None): the metrics module registers one."""

INLINE_RECORDS: Final = 64
"""Pages and results of more records are mapped and shaped on a worker thread. Measured
(CPU): mapping ~3.4 us, wire form ~2 us and prompt ~3 us per demo record, so 64 records
cost ~0.5 ms, about twice a hop to a thread; max_recall_limit can ask for 10,000."""

MAX_FETCH: Final = 10_000
"""Lucene's default index.max_result_window: no refill asks for a larger page."""


def refill_sizes(limit: int, most: int = MAX_FETCH) -> Iterator[int]:
    """The page sizes a read with an exact check tries in turn: `limit`, then x4 up to
    `most` candidates (never fewer than `limit`, never more than MAX_FETCH)."""
    top = min(max(limit, most), MAX_FETCH)
    size = min(limit, top)
    yield size
    while size < top:
        size = min(top, size * 4)
        yield size


async def off_loop_if_large(count: int, work: Callable[[], T]) -> T:
    """``work()`` inline for a small page, else on a worker thread (the deadline still
    bounds the wait: a cancelled wait leaves the thread to finish alone)."""
    if count <= INLINE_RECORDS:
        return work()
    return await asyncio.to_thread(work)


class RecordPager:
    """One store's reads from its connector, as records that meet `where` exactly."""

    def __init__(
        self,
        store: str,
        shaper: ResultShaper,
        guard: EngineGuard,
        observers: list[EngineObserver] | None = None,
        where_candidates: int = MAX_FETCH,
    ) -> None:
        """``where_candidates``: the most of the engine's matches one read checks
        against an approximated ``where`` (the store's ``limits.max_where_candidates``)."""
        self._store = store
        self._where_candidates = where_candidates
        self._shaper = shaper
        self.guard = guard
        """The store's breaker and in-flight limit (the Store reads and replaces it here)."""
        self._observers = observers or []

    async def engine(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        """One engine call through the guard, timed for every observer.

        Calls the guard refuses never reach the engine: they are counted as shed, not timed.
        """
        return await self.guard.call(partial(self._observed, operation, call))

    async def _observed(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        start = time.perf_counter()
        error: str | None = None
        try:
            return await call()
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            for observe in self._observers:
                observe(self._store, operation, time.perf_counter() - start, error)

    async def read(self, connector: Connector, plan: ReadPlan) -> list[Record]:
        """At most `plan.limit` records, in the engine's order, that meet `where` exactly.

        Without an exact check one page of `limit` answers; with one, a page that lost
        records to it is asked again four times larger, until `limit` survive, the
        engine has no more, or a page has reached the store's bound on the candidates
        checked (then the answer is the records among those that meet `where`).
        """
        sizes = (
            refill_sizes(plan.limit, self._where_candidates)
            if plan.exact is not None
            else (plan.limit,)
        )
        records: list[Record] = []
        for size in sizes:
            hits = await self.engine(plan.operation, partial(plan.read, connector, size))
            records = await off_loop_if_large(len(hits), partial(self._records, hits, plan))
            if len(records) >= plan.limit or len(hits) < size:
                break
        return records[: plan.limit]

    def _records(self, hits: list[Hit], plan: ReadPlan) -> list[Record]:
        return self._shaper.records(
            hits, plan.exact, with_embedding=plan.with_vectors, ranked=plan.ranked
        )
