"""The engine-neutral Qdrant requests as qdrant-edge objects (an in-process store only).

Pure: changes with qdrant-edge's classes, never with what is asked. qdrant-edge's
API is its own (``QueryRequest``, ``Prefetch``, ``Fusion.Rrf``, ``ScrollRequest``,
``OrderBy``), not qdrant-client's.

A boolean value is matched as ``numpy.bool_``: qdrant-edge-py reads a Python ``bool``
as the integer 1 or 0 (``bool`` is an ``int`` to its converter, which tries integers
first), which matches no boolean payload, while ``numpy.bool_`` is no integer and
converts to Qdrant's boolean match. The engine then filters exactly as a server does,
in ``must``, ``should`` and ``must_not`` alike, with or without a ``bool`` payload
index. Each such match is checked to hold a boolean before it is sent.
"""

from __future__ import annotations

from typing import Any

import qdrant_edge as qe

from connectors.base import SparseVector
from connectors.errors import EngineRejected
from connectors.qdrant.engine import Nearest, Ranked, Rrf, Scroll
from connectors.qdrant.query import (
    AllOf,
    Cond,
    DateRange,
    FloatRange,
    HasIds,
    Match,
    MatchAnyOf,
    NoneOf,
    Words,
)


def edge_filter(qfilter: AllOf | None) -> qe.Filter | None:
    """The payload filter as qdrant-edge's ``Filter``.

    Raises:
        EngineRejected: a condition on a boolean value that this qdrant-edge cannot
            express (its match would not hold a boolean).
    """
    if qfilter is None:
        return None
    return qe.Filter(must=[_condition(c) for c in qfilter.conditions])


def _condition(c: Cond) -> Any:
    if isinstance(c, Match):
        return qe.FieldCondition(key=c.field, match=match_value(c.value))
    if isinstance(c, MatchAnyOf):
        return qe.FieldCondition(key=c.field, match=qe.MatchAny(list(c.values)))  # type: ignore[arg-type]
    if isinstance(c, Words):
        return qe.FieldCondition(key=c.field, match=qe.MatchText(c.text))
    if isinstance(c, HasIds):
        return qe.HasIdCondition(set(c.ids))
    if isinstance(c, FloatRange):
        return qe.FieldCondition(key=c.field, range=qe.RangeFloat(gte=c.gte, lte=c.lte))
    if isinstance(c, DateRange):
        return qe.FieldCondition(key=c.field, range=qe.RangeDateTime(gte=c.gte, lt=c.lt))
    if isinstance(c, NoneOf):
        return qe.Filter(must_not=[_condition(x) for x in c.conditions])
    return qe.Filter(should=[_condition(x) for x in c.conditions])


def match_value(value: str | int | bool) -> qe.MatchValue:
    """An exact match on a keyword, an integer or a boolean (see the module docstring).

    Raises:
        EngineRejected: a boolean this qdrant-edge would not match as a boolean.
    """
    if not isinstance(value, bool):
        return qe.MatchValue(value)
    import numpy as np  # only when a filter holds a boolean: the demo starts without it

    match = qe.MatchValue(np.bool_(value))  # type: ignore[arg-type]
    if match.value is not value:
        # Another qdrant-edge or numpy converts it otherwise: refused rather than answered
        # with nothing.
        raise EngineRejected("qdrant-edge cannot match a boolean payload value")
    return match


def vector(v: list[float] | SparseVector) -> Any:
    """A query or point vector: dense as is, sparse as qdrant-edge's ``SparseVector``."""
    if isinstance(v, SparseVector):
        return qe.SparseVector(indices=list(v.indices), values=list(v.values))
    return v


def _nearest(n: Nearest) -> qe.Query:
    return qe.Query.Nearest(vector(n.vector), using=n.using)


def query_request(r: Ranked) -> qe.QueryRequest:
    """One ranked query: a nearest query, or prefetches under the filter fused by RRF."""
    qfilter = edge_filter(r.qfilter)
    if isinstance(r.query, Rrf):
        prefetches = [
            qe.Prefetch(limit=p.limit, query=_nearest(p), filter=qfilter) for p in r.prefetch
        ]
        return qe.QueryRequest(
            limit=r.limit,
            query=qe.Fusion.Rrf(k=r.query.k, weights=r.query.weights),  # type: ignore[arg-type]
            prefetches=prefetches,
            filter=qfilter,
            with_payload=r.with_payload,
            with_vector=r.with_vectors,
        )
    return qe.QueryRequest(
        limit=r.limit,
        query=_nearest(r.query),
        filter=qfilter,
        with_payload=r.with_payload,
        with_vector=r.with_vectors,
    )


def scroll_request(s: Scroll) -> qe.ScrollRequest:
    """One scroll page, by id from ``offset`` or ordered by a payload field."""
    order = None
    if s.order_by is not None:
        key, newest_first = s.order_by
        order = qe.OrderBy(
            key=key, direction=qe.Direction.Desc if newest_first else qe.Direction.Asc
        )
    return qe.ScrollRequest(
        offset=s.offset,
        limit=s.limit,
        filter=edge_filter(s.qfilter),
        with_payload=s.with_payload,
        with_vector=s.with_vectors,
        order_by=order,
    )
