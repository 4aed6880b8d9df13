"""The engine-neutral Qdrant requests as qdrant-client models (a Qdrant server store only).

Pure: changes with qdrant-client's model classes, never with what is asked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from connectors.base import SparseVector
from connectors.errors import EngineRejected
from connectors.qdrant.engine import Nearest, Ranked, Rrf, Shape
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

if TYPE_CHECKING:
    from qdrant_client.http import models

log = logging.getLogger("connectors.qdrant.connector")


def server_filter(qfilter: AllOf | None) -> models.Filter | None:
    """The payload filter as a qdrant-client model.

    Raises:
        EngineRejected: a value the client's models refuse (pydantic validation).
    """
    from qdrant_client.http import models

    if qfilter is None:
        return None
    try:
        return models.Filter(must=[_condition(c) for c in qfilter.conditions])
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        log.debug("qdrant filter refused: %s", exc)
        raise EngineRejected("qdrant cannot express the filter") from exc


def _condition(c: Cond) -> Any:
    from qdrant_client.http import models

    if isinstance(c, Match):
        return models.FieldCondition(key=c.field, match=models.MatchValue(value=c.value))
    if isinstance(c, MatchAnyOf):
        return models.FieldCondition(key=c.field, match=models.MatchAny(any=list(c.values)))
    if isinstance(c, Words):
        return models.FieldCondition(key=c.field, match=models.MatchText(text=c.text))
    if isinstance(c, HasIds):
        return models.HasIdCondition(has_id=list(c.ids))
    if isinstance(c, FloatRange):
        return models.FieldCondition(key=c.field, range=models.Range(gte=c.gte, lte=c.lte))
    if isinstance(c, DateRange):
        return models.FieldCondition(key=c.field, range=models.DatetimeRange(gte=c.gte, lt=c.lt))
    if isinstance(c, NoneOf):
        return models.Filter(must_not=[_condition(x) for x in c.conditions])
    return models.Filter(should=[_condition(x) for x in c.conditions])


def vector(v: list[float] | SparseVector) -> Any:
    """A query vector: dense as is, sparse as the client's model."""
    from qdrant_client.http import models

    if isinstance(v, SparseVector):
        return models.SparseVector(indices=list(v.indices), values=list(v.values))
    return v


def query_arguments(r: Ranked) -> dict[str, Any]:
    """``query_points``' keyword arguments (without the collection and timeout)."""
    from qdrant_client.http import models

    qfilter = server_filter(r.qfilter)
    query: Any
    using: str | None = None
    prefetch: list[models.Prefetch] | None = None
    if isinstance(r.query, Rrf):
        query = models.RrfQuery(rrf=models.Rrf(k=r.query.k, weights=r.query.weights))
        prefetch = [
            models.Prefetch(query=vector(p.vector), using=p.using, limit=p.limit, filter=qfilter)
            for p in r.prefetch
        ]
    else:
        query, using = vector(r.query.vector), r.query.using
    return {
        "query": query,
        "using": using,
        "prefetch": prefetch,
        "query_filter": qfilter,
        "limit": r.limit,
        "with_payload": r.with_payload,
        "with_vectors": r.with_vectors,
    }


def batch_request(r: Ranked) -> models.QueryRequest:
    """One leg of ``query_batch_points``: a nearest query."""
    from qdrant_client.http import models

    assert isinstance(r.query, Nearest)
    return models.QueryRequest(
        query=models.NearestQuery(nearest=vector(r.query.vector)),
        using=r.query.using,
        filter=server_filter(r.qfilter),
        limit=r.limit,
        with_payload=r.with_payload,
        with_vector=r.with_vectors,
    )


def shape_of(info: models.CollectionInfo) -> Shape:
    """What the collection holds, from the server's collection info."""
    from qdrant_client.http import models

    params = info.config.params
    vectors = params.vectors
    dense: dict[str, tuple[int, str]] = {}
    if isinstance(vectors, models.VectorParams):
        dense[""] = (vectors.size, _name(vectors.distance))
    elif isinstance(vectors, dict):
        dense = {n: (v.size, _name(v.distance)) for n, v in vectors.items()}
    sparse = {
        n: s.modifier == models.Modifier.IDF for n, s in (params.sparse_vectors or {}).items()
    }
    schema = {f: _name(i.data_type) for f, i in (info.payload_schema or {}).items()}
    return Shape(dense=dense, sparse=sparse, payload_schema=schema)


def _name(value: Any) -> str:
    """An enum member's value as qdrant-client names it ("Cosine", "keyword")."""
    return str(getattr(value, "value", value))
