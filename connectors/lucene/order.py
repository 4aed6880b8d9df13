"""Ordered reads on Elasticsearch/OpenSearch: the sort plan, page bodies and the paging loop.

:class:`OrderedBodies` is pure (plan and bodies); :class:`OrderedReader` runs
the pages (``search_after``, or ``from`` inside a point in time) through
callables the connector hands it, so it holds no client and no retries. Every
page and every fetch carries the request's filter, the caller's scope included.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.base import ID_FIELD, Filter, Hit, OrderedRequest
from connectors.errors import EngineAnswerUnusable
from connectors.lucene.failures import NOT_A_HIT, search_hits
from connectors.lucene.query import MAX_WINDOW, Body, QueryTranslator

logger = logging.getLogger(__name__)

PIT_KEEP_ALIVE = "1m"
"""A point in time lives for one ordered read only; a minute covers its pages."""


@dataclass(frozen=True, slots=True)
class EngineIdOrder:
    """A dialect's tie-break for stores whose record id is the engine's ``_id``.

    ``_id`` itself cannot be sorted on without fielddata (off in Elasticsearch
    8, deprecated with a warning per request in OpenSearch), so the read runs in
    a point in time and breaks ties on a per-document sort key of the engine.
    """

    tiebreak: str
    search_after: bool
    """True when the key is unique across shards (Elasticsearch's ``_shard_doc``);
    False when it is only unique within a shard (OpenSearch's ``_doc``), where
    pages are taken by ``from`` inside the PIT instead (see :class:`OrderPlan`)."""


ES_ENGINE_ID_ORDER = EngineIdOrder("_shard_doc", search_after=True)


@dataclass(frozen=True, slots=True)
class OrderPlan:
    """How ordered reads sort: ``primary`` (created_at, or None) then a unique ``tiebreak``.

    The tie-break makes the order total, which ``search_after`` paging needs: a
    page boundary inside a run of equal timestamps must neither skip nor repeat
    documents. It is ``mapping.id`` when that is a source field (unique by the
    mapping's contract). With the engine's own ``_id`` as the record id the read
    runs in a point in time (``pit``), see :class:`EngineIdOrder`:

    - Elasticsearch breaks ties on ``_shard_doc``, unique across shards in a PIT.
    - OpenSearch (2.x has no ``_shard_doc``) sorts on ``_doc``, unique only per
      shard: ``search_after`` on it could skip a tie on another shard, so pages
      are taken with ``from``. Inside one PIT the shards' merge order is fixed
      (ties go by shard, then document), so ``from`` pages are consistent; they
      reach ``MAX_WINDOW`` (``index.max_result_window``) documents, the most a
      store's limits allow.

    Without created_at the tie-break alone is the order: the id ascending, or
    index order (roughly insertion order), stable while the index is unchanged.
    """

    primary: str | None
    tiebreak: str
    pit: bool
    search_after: bool = True


class OrderedBodies:
    """Bodies of ordered reads and fetches for one store (pure)."""

    def __init__(
        self, translator: QueryTranslator, engine_id_order: EngineIdOrder = ES_ENGINE_ID_ORDER
    ) -> None:
        self._t = translator
        fields = translator.fields
        primary = translator.exact(fields.created_at) if fields.created_at else None
        if fields.id != ID_FIELD:
            self.plan = OrderPlan(primary, translator.exact(fields.id), pit=False)
        else:
            self.plan = OrderPlan(
                primary,
                engine_id_order.tiebreak,
                pit=True,
                search_after=engine_id_order.search_after,
            )

    def sort(self, *, descending: bool) -> list[Body]:
        """The total order of ordered reads (see :class:`OrderPlan`)."""
        order = "desc" if descending else "asc"
        keys = [self.plan.primary] if self.plan.primary else []
        keys.append(self.plan.tiebreak)
        return [{key: {"order": order}} for key in keys]

    def page(
        self,
        request: OrderedRequest,
        size: int,
        *,
        search_after: Sequence[Any] | None = None,
        offset: int = 0,
        pit_id: str | None = None,
    ) -> Body:
        """One page of an ordered read: after the previous page's last ``sort``
        values, or at ``offset`` when the plan pages by ``from``."""
        body = self._t.common(size, with_vectors=request.with_vectors)
        body["query"] = self._t.filtered(request.filter)
        body["sort"] = self.sort(descending=request.newest_first)
        if search_after is not None:
            body["search_after"] = list(search_after)
        if offset:
            body["from"] = offset
        if pit_id is not None:
            body["pit"] = {"id": pit_id, "keep_alive": PIT_KEEP_ALIVE}
        return body

    def fetch(self, flt: Filter, *, with_vectors: bool = False) -> Body:
        """The first document matching ``flt``: the newest one when created_at is mapped."""
        body = self._t.common(1, with_vectors=with_vectors)
        body["query"] = self._t.filtered(flt)
        if self.plan.primary:
            body["sort"] = [{self.plan.primary: {"order": "desc"}}]
        return body


SearchPage = Callable[[Body, bool], Awaitable[Mapping[str, Any]]]
"""Run one page ``(body, in_pit)``: the connector's retried, deadline-bound search."""


class OrderedReader:
    """Reads hits in (created_at, tie-break) order, page by page."""

    def __init__(
        self,
        bodies: OrderedBodies,
        translator: QueryTranslator,
        *,
        page_size: int,
        search_page: SearchPage,
        open_pit: Callable[[], Awaitable[str]],
        release_pit: Callable[[str], Awaitable[None]],
    ) -> None:
        self._bodies = bodies
        self._t = translator
        self._page_size = page_size
        self._search_page = search_page
        self._open_pit = open_pit
        self._release_pit = release_pit

    async def read(self, request: OrderedRequest) -> list[Hit]:
        """Up to ``request.limit`` hits in order (``from`` paging stops at the result window).

        Raises:
            whatever ``search_page`` and ``open_pit`` raise (the connector's neutral errors).
        """
        plan = self._bodies.plan
        limit = max(0, request.limit)
        if not plan.search_after:
            limit = min(limit, MAX_WINDOW)
        if limit == 0:
            return []
        pit_id = await self._open_pit() if plan.pit else None
        try:
            hits: list[Hit] = []
            after: list[Any] | None = None
            while len(hits) < limit:
                size = min(self._page_size, limit - len(hits))
                body = self._bodies.page(
                    request,
                    size,
                    search_after=after,
                    offset=0 if plan.search_after else len(hits),
                    pit_id=pit_id,
                )
                response = await self._search_page(body, plan.pit)
                pit_id = response.get("pit_id", pit_id)
                page = search_hits(response)
                for h in self._t.hits(response, with_vectors=request.with_vectors):
                    h.score = None
                    hits.append(h)
                if len(page) < size:
                    break
                if plan.search_after:
                    after = page[-1].get("sort")  # a dict: hits() read the page
                    if not isinstance(after, list):
                        raise EngineAnswerUnusable(NOT_A_HIT)
            return hits
        finally:
            if pit_id is not None:
                await self._release_pit(pit_id)
