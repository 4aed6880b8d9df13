"""Samples of what a store holds, for onboarding: `check`, the try page, MCP resources.

Each read goes through the store's guard under its deadline, as a timeline read does.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import TYPE_CHECKING, Any

from connectors.base import Hit, OrderedRequest
from connectors.retry import deadline_scope
from gateway.security.scopes import LOCAL, Caller
from gateway.store.planner import MatchesNothing

if TYPE_CHECKING:
    from gateway.store.store import Store


async def preview(store: Store, n: int, caller: Caller = LOCAL) -> list[dict[str, Any]]:
    """The newest n documents as the engine holds them, each beside the record it becomes.

    The mapping preview of the try page: the document is what the connector read (the
    mapped fields only, as stored), under the caller's scope exactly as a timeline read.

    Raises:
        ScopeDenied, ConnectorError.
    """
    try:
        flt = store.planner.read_filter(None, None, caller, None)
    except MatchesNothing:
        return []
    request = OrderedRequest(limit=n, filter=flt)
    async with deadline_scope(store.timeout_s):
        hits = await store.pager.engine(
            "preview", partial(store.connector_for(caller).ordered, request)
        )
    documents = [{"id": h.id, "source": copy.deepcopy(h.source)} for h in hits]
    records = store.shaper.records(hits, None, with_embedding=False)
    return [{"document": d, "record": r.to_wire()} for d, r in zip(documents, records, strict=True)]


async def sample(store: Store, n: int = 3) -> list[dict[str, Any]]:
    """The newest n mapped records: the onboarding preview of `a2m-gateway check`."""
    async with deadline_scope(store.timeout_s):
        hits: list[Hit] = await store.pager.engine(
            "sample", partial(store.connector.ordered, OrderedRequest(limit=n))
        )
    return [r.to_wire() for r in store.shaper.records(hits, None, with_embedding=False)]


async def sample_vectors(store: Store, n: int) -> list[tuple[str | None, list[float] | None]]:
    """The newest n records' content beside their stored vectors, through the guard."""
    async with deadline_scope(store.timeout_s):
        hits: list[Hit] = await store.pager.engine(
            "sample",
            partial(store.connector.ordered, OrderedRequest(limit=n, with_vectors=True)),
        )
    return [(store.mapper.to_record(h).content, h.vector) for h in hits]
