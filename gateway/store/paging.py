"""Engine pages -> records: every engine call a Store makes, timed, refilled, off the loop.

What changes together here is how a store reads from its connector: the `where`
refill loop (the engine only approximates `where`, so a read that lost records
to the exact check asks again for more, x4 each time, up to MAX_FETCH), the
observers timing each engine call (metrics), the store's guard (circuit breaker and
in-flight limit) around each, and moving the mapping of a large page off the event
loop. The Store decides what to ask; this asks it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Final, TypeVar

from connectors.base import Connector, Filter, Hit, OrderedRequest, SearchRequest
from gateway.a2m.params import WhereValue
from gateway.a2m.records import Record
from gateway.resilience import EngineGuard
from gateway.store.planner import QueryPlanner
from gateway.store.shaper import ResultShaper

T = TypeVar("T")

EngineObserver = Callable[[str, str, float, str | None], None]
"""(store, operation, seconds, error kind or None): the metrics module registers one."""

INLINE_RECORDS: Final = 64
"""Pages and results of more records are mapped and shaped on a worker thread. Measured
(CPU): mapping ~3.4 us, wire form ~2 us and prompt ~3 us per demo record, so 64 records
cost ~0.5 ms, about twice a hop to a thread; max_recall_limit can ask for 10,000."""


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
        planner: QueryPlanner,
        shaper: ResultShaper,
        guard: EngineGuard,
        observers: list[EngineObserver] | None = None,
    ) -> None:
        self._store = store
        self._planner = planner
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

    async def _records(
        self, hits: list[Hit], where: dict[str, WhereValue] | None, with_embedding: bool
    ) -> list[Record]:
        return await off_loop_if_large(
            len(hits),
            lambda: self._shaper.records(hits, where, with_embedding=with_embedding),
        )

    async def search(
        self,
        connector: Connector,
        probe: SearchRequest,
        where: dict[str, WhereValue] | None,
        limit: int,
        *,
        with_embedding: bool,
    ) -> list[Record]:
        """Ranked records, asking again for more until `limit` meet `where`."""
        records: list[Record] = []
        for size in self._planner.fetch_sizes(limit, where):
            request = dataclasses.replace(
                probe,
                limit=size,
                candidates=max(probe.candidates, size),
                fusion_depth=self._planner.config.search.fusion_depth(size),
            )
            hits = await self.engine("search", partial(connector.search, request))
            records = await self._records(hits, where, with_embedding)
            if len(records) >= limit or len(hits) < size:
                break
        return records

    async def ordered(
        self,
        connector: Connector,
        flt: Filter,
        where: dict[str, WhereValue] | None,
        limit: int,
        *,
        newest_first: bool,
        with_embedding: bool,
    ) -> list[Record]:
        """An ordered read (no scores), asking again for more until `limit` meet `where`."""
        records: list[Record] = []
        for size in self._planner.fetch_sizes(limit, where):
            request = OrderedRequest(
                limit=size, filter=flt, newest_first=newest_first, with_vectors=with_embedding
            )
            hits = await self.engine("ordered", partial(connector.ordered, request))
            for hit in hits:
                hit.score = None
            records = await self._records(hits, where, with_embedding)
            if len(records) >= limit or len(hits) < size:
                break
        return records[:limit]
