"""The retried, deadline-bound Qdrant read and the scroll-based ordered reads.

:class:`QdrantReader` holds the client and what every read needs; ranked search
(``connectors.qdrant.searcher``) and then opening and checks
(``connectors.qdrant.connector``) build on it. Ordered reads
scroll with ``order_by`` on ``mapping.created_at``, else by point id; with a key
prefix they page on until ``limit`` exact matches.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from connectors.errors import EngineUnavailable
from connectors.qdrant.engine import Engine, Scroll, WithVectors
from connectors.qdrant.layout import Layout
from connectors.qdrant.query import Translated, has_prefix
from connectors.retry import remaining, retry_read
from connectors.tracing import traced_client

if TYPE_CHECKING:
    from connectors.qdrant.spec import QdrantSpec

Record = Any
"""A point as the engine returns it: ``id``, ``payload``, ``vector``."""

T = TypeVar("T")

_PAGE: Final = 256
"""Scroll page size when post-filtering or scanning by id."""

_PREFIX_SCAN: Final = 10_000
"""Points a search scans (key field only) to resolve a key prefix into ids."""
_PREFIX_IDS: Final = 2_000
"""Most ids a resolved key prefix may send as a has_id filter."""


class QdrantReader:
    """One collection's client and reads; nothing is contacted until a read."""

    def __init__(self, spec: QdrantSpec) -> None:
        self._collection = spec.index
        self._client: Engine | None = None
        self._payload_fields = list(spec.fields.read)
        self._created_at = spec.fields.created_at
        self._retries = spec.connection.retries
        self._timeout_s = spec.connection.timeout_ms / 1000.0
        # Fixed by the connector's open(): which vectors the collection holds.
        self._layout = Layout()

    async def _read(self, call: Callable[[Engine], Awaitable[T]]) -> T:
        """One engine read: retried while transient, bounded by the deadline, translated.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError.
        """
        client = self._client
        if client is None:
            raise EngineUnavailable("qdrant connector is not open")

        async def attempt() -> T:
            async with asyncio.timeout(remaining(self._timeout_s)):
                return await call(traced_client(client, "qdrant", self._collection))

        with client.errors():
            return await retry_read(
                attempt,
                transient=client.is_transient,
                attempts=self._retries,
                retry_after=client.retry_after_s,
            )

    def _with_vectors(self, wanted: bool) -> WithVectors:
        if not wanted or not self._layout.has_dense:
            return False
        name = self._layout.dense_name
        return [name] if name is not None else True

    # -- ordered reads -----------------------------------------------------------------

    async def _by_value(
        self, tr: Translated, limit: int, newest_first: bool, with_vectors: bool
    ) -> list[Record]:
        """scroll + order_by; with a key prefix the window doubles until limit exact matches.

        Re-reading a doubled window from the start (instead of start_from paging)
        stays correct when many points share one timestamp.
        """
        assert self._created_at is not None
        order = (self._created_at, newest_first)
        window = limit if tr.prefix is None else max(4 * limit, _PAGE)
        wv = self._with_vectors(with_vectors)
        while True:
            records, _ = await self._scroll(tr, window, wv, order_by=order)
            records = _ties_by_id(records, newest_first)
            matched = [r for r in records if has_prefix(r.payload, tr.prefix)]
            if len(matched) >= limit or len(records) < window:
                return matched[:limit]
            window *= 2

    async def _scan_by_id(
        self,
        tr: Translated,
        with_vectors: bool,
        page: int,
        visit: Callable[[Record], bool],
    ) -> None:
        """Scroll by id ascending, calling visit on each exact match until it returns False."""
        offset: Any = None
        wv = self._with_vectors(with_vectors)
        while True:
            records, offset = await self._scroll(tr, page, wv, offset=offset)
            for r in records:
                if has_prefix(r.payload, tr.prefix) and not visit(r):
                    return
            if offset is None:
                return

    async def _scroll(
        self,
        tr: Translated,
        limit: int,
        with_vectors: WithVectors,
        *,
        order_by: tuple[str, bool] | None = None,
        offset: Any = None,
        payload: list[str] | None = None,
    ) -> tuple[list[Record], Any]:
        request = Scroll(
            qfilter=tr.qfilter,
            limit=limit,
            with_payload=(payload or self._payload_fields) or False,
            with_vectors=with_vectors,
            order_by=order_by,
            offset=offset,
        )
        return await self._read(lambda c: c.scroll(request))

    async def _prefix_ids(self, tr: Translated) -> list[Any] | None:
        """Ids of the points whose key starts with the prefix, or None when too many.

        A search cannot post-filter without losing ``limit`` (the engine ranks a
        fixed number of candidates), so a selective prefix is resolved first by a
        scroll that reads only the key field, and the search filters on the ids.
        Beyond _PREFIX_SCAN scanned points or _PREFIX_IDS matches, the caller
        over-fetches instead: a prefix that broad rarely leaves the page short.
        """
        assert tr.prefix is not None
        ids: list[Any] = []
        scanned = 0
        offset: Any = None
        while True:
            records, offset = await self._scroll(
                tr, 1024, False, offset=offset, payload=[tr.prefix[0]]
            )
            scanned += len(records)
            ids.extend(r.id for r in records if has_prefix(r.payload, tr.prefix))
            if len(ids) > _PREFIX_IDS or (offset is not None and scanned >= _PREFIX_SCAN):
                return None
            if offset is None:
                return ids

    async def _first_by_id(self, tr: Translated, limit: int, with_vectors: bool) -> list[Record]:
        out: list[Record] = []

        def keep(r: Record) -> bool:
            out.append(r)
            return len(out) < limit

        page = limit if tr.prefix is None else max(limit, _PAGE)
        await self._scan_by_id(tr, with_vectors, page, keep)
        return out

    async def _last_by_id(self, tr: Translated, limit: int, with_vectors: bool) -> list[Record]:
        """The last ``limit`` ids, highest first: a full scan, memory bounded by limit."""
        tail: deque[Record] = deque(maxlen=limit)

        def keep(r: Record) -> bool:
            tail.append(r)
            return True

        await self._scan_by_id(tr, with_vectors, max(limit, _PAGE * 4), keep)
        return list(reversed(tail))


def id_key(point_id: Any) -> tuple[int, int | str]:
    """A point id's sort key: integers first, by value, then UUIDs by their text."""
    if isinstance(point_id, int):
        return (0, point_id)
    return (1, str(point_id))


def _ties_by_id(records: list[Record], newest_first: bool) -> list[Record]:
    """Records with one order value by id: the engine's order of ties is not stable."""
    values: list[float] = []
    for r in records:
        value = getattr(r, "order_value", None)
        if not isinstance(value, int | float):
            return records
        values.append(value)
    sign = -1 if newest_first else 1
    return [
        r
        for _, r in sorted(
            zip(values, records, strict=True), key=lambda vr: (sign * vr[0], id_key(vr[1].id))
        )
    ]
