"""Ranked search on a Qdrant collection: the lexical leg's encoding, one query or two fused.

The legs and their queries are built in ``connectors.qdrant.search``; this
class runs them through the reader's retried reads and maps the points to hits.
The connector (``connectors.qdrant.connector``) adds opening and checks.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from connectors.base import Hit, SearchRequest, SparseVector
from connectors.fusion import fuse
from connectors.qdrant.query import (
    Translated,
    UnsatisfiableFilter,
    has_prefix,
    translate_filter,
    with_ids,
)
from connectors.qdrant.reader import QdrantReader, id_key
from connectors.qdrant.search import (
    Leg,
    check_legs,
    leg_requests,
    legs,
    normalise,
    ranked_query,
    vector_of,
)
from connectors.qdrant.sparse import LexicalSparseEncoder
from connectors.retry import remaining

if TYPE_CHECKING:
    from connectors.qdrant.spec import QdrantSpec

ENCODE_INLINE_CHARS: Final = 512
"""Longer query texts are encoded on a worker thread. Measured (CPU): 0.23 ms at 512
characters, about what the hop to a thread costs; 1.8 ms at 4,000, which would stall
every other request on the loop."""


class QdrantSearcher(QdrantReader):
    """Ranked reads: the sparse (lexical) leg, the dense leg, or both fused."""

    def __init__(self, spec: QdrantSpec) -> None:
        super().__init__(spec)
        self._encoder = (
            LexicalSparseEncoder(analyzer=spec.search.sparse_analyzer)
            if spec.search.sparse_vector is not None
            else None
        )

    async def search(self, request: SearchRequest) -> list[Hit]:
        """Ranked hits, best first, scores in [0, 1].

        Raises:
            EngineRejected: the request asks for a leg the collection does not have.
            EngineUnavailable, EngineTimeout, EngineConfigError: see the module docstring.
        """
        try:
            tr = translate_filter(request.filter)
        except UnsatisfiableFilter:
            return []
        check_legs(request, self._layout)
        ranked_legs = legs(request, await self._sparse(request), self._layout)
        if not ranked_legs:
            return []  # e.g. a query of stopwords only: nothing to rank by

        limit = request.limit
        if tr.prefix is not None:
            ids = await self._prefix_ids(tr)
            if ids is not None and not ids:
                return []
            if ids is not None:
                tr = with_ids(tr, ids)  # exact: the engine ranks only prefixed points
            else:
                limit = max(request.limit, request.candidates)  # broad prefix: over-fetch
        with_vectors = self._with_vectors(request.with_vectors)
        if len(ranked_legs) == 2 and request.fusion != "rrf":
            return await self._fused(request, ranked_legs, tr, limit, with_vectors)
        kind, ranked = ranked_query(  # the prefix's ids included in the filter
            request,
            ranked_legs,
            tr.qfilter,
            limit=limit,
            with_payload=self._payload_fields or False,
            with_vectors=with_vectors,
        )
        response = await self._read(lambda c: c.query_points(ranked))
        points = [p for p in response if has_prefix(p.payload, tr.prefix)]
        scores = normalise(kind, self._layout, [p.score for p in points])
        # Ordered by the normalised score (a Euclid distance ranks low-first); the engine
        # returns equal scores (common under RRF) in no fixed order: ties by id.
        best = sorted(zip(scores, points, strict=True), key=lambda sp: (-sp[0], id_key(sp[1].id)))[
            : request.limit
        ]
        return [
            Hit(
                id=str(p.id),
                source=dict(p.payload or {}),
                score=score,
                vector=vector_of(p.vector, self._layout) if request.with_vectors else None,
            )
            for score, p in best
        ]

    async def _fused(
        self,
        request: SearchRequest,
        ranked_legs: list[Leg],
        tr: Translated,
        limit: int,
        with_vectors: Any,
    ) -> list[Hit]:
        """Both legs in one ``query_batch_points``, fused here by ``search.fusion``."""
        requests = leg_requests(
            request,
            ranked_legs,
            tr.qfilter,
            limit=limit,
            with_payload=self._payload_fields or False,
            with_vectors=with_vectors,
        )
        responses = await self._read(lambda c: c.query_batch_points(requests))
        lists: list[tuple[list[Hit], float]] = []
        for (kind, *_, weight), response in zip(ranked_legs, responses, strict=True):
            points = [p for p in response if has_prefix(p.payload, tr.prefix)]
            scores = normalise(kind, self._layout, [p.score for p in points])
            hits = [
                Hit(
                    id=str(p.id),
                    source=dict(p.payload or {}),
                    score=score,
                    vector=vector_of(p.vector, self._layout) if request.with_vectors else None,
                )
                for p, score in zip(points, scores, strict=True)
            ]
            lists.append((hits, weight))
        return fuse(lists, fusion=request.fusion, k=request.rrf_k, limit=request.limit)

    async def _sparse(self, request: SearchRequest) -> SparseVector | None:
        """The lexical leg: the request's own sparse vector, else its text encoded here."""
        if request.sparse is not None or request.text is None or self._encoder is None:
            return request.sparse
        if len(request.text) <= ENCODE_INLINE_CHARS:
            return self._encoder.encode_query(request.text)
        # Off the loop; the request's deadline still bounds the wait.
        async with asyncio.timeout(remaining(self._timeout_s)):
            return await asyncio.to_thread(self._encoder.encode_query, request.text)
