"""Qdrant connector: qdrant-client's async API, one code path for a server and local mode.

Where the store points:
  * ``connection.url`` (+ ``api_key``): a Qdrant server over REST. A URL
    without a port means 6333, qdrant-client's convention; write ``:443``
    behind a TLS proxy.
  * ``connection.path`` or ``connection.location: ":memory:"``: Qdrant's
    in-process local mode (the embedded demo and the test engine), run on one
    worker thread off the event loop (``connectors.qdrant.local``); it locks
    its path: one process at a time. Meant for the demo and small stores.

Search (the request's legs and query in ``connectors.qdrant.search``):
  * a lexical query's text is encoded here into the sparse leg
    (``connectors.qdrant.sparse``, with ``search.sparse_analyzer``), off the event
    loop when it is long; a request may also carry a sparse vector of its own;
  * sparse only -> ``query_points`` on the named sparse vector (lexical leg);
  * dense only -> ``query_points`` on the dense vector (named, or the
    collection's unnamed default when ``search.vector_field`` is unset);
  * both -> each leg ``candidates`` deep, fused by the request's ``fusion``: the score
    fusions (``zscore``, the default, ``minmax``, ``dbsf``) send the two legs in one
    ``query_batch_points`` and fuse them here with :func:`connectors.fusion.fuse`, as
    the Lucene connectors do; ``rrf`` sends two prefetches fused by Qdrant's reciprocal
    rank fusion with the request's k and weights (``RrfQuery``, qdrant-client 1.16+;
    a server needs Qdrant 1.16+ for parameterised RRF; weights only sent when they
    differ). A leg with weight 0 is dropped rather than sent.
  Scores are mapped into [0, 1], higher better: cosine and dot s -> (s+1)/2
  clamped; Euclid distance d -> 1/(1+d); sparse and RRF scores, which have no
  fixed range, are divided by the best score of the result; fused scores are the
  fusion's own, in [0, 1].

What the collection holds is checked once at open() (``connectors.qdrant.layout``).
Filters become payload filters (``connectors.qdrant.query``). Qdrant has no
prefix match on keyword payloads, so ``key_prefix`` is a token prefilter
(``MatchText`` on the prefix's complete words, which are whole tokens of every
key that starts with the prefix) plus an exact ``startswith`` post-filter.
Local mode and a server without a text index on the key field tokenize with
Qdrant's default word tokenizer, which is what the prefilter assumes; on a
server give the key field a full-text index with the ``word`` (or ``prefix``)
tokenizer — a ``whitespace`` tokenizer would make the prefilter drop matches.
Ordered reads and fetch page on until ``limit`` exact matches are found.
Search first resolves the prefix into point ids (a scroll reading only the
key field, at most 10,000 points and 2,000 matches) and ranks with a
``has_id`` filter, which is exact; a broader prefix falls back to
over-fetching ``candidates`` and post-filtering, which can return fewer than
``limit`` hits when few of those candidates carry the prefix.

Ordered reads use ``scroll`` with ``order_by`` on ``mapping.created_at``. A
server needs a ``datetime`` (ISO-8601 payloads), ``integer`` or ``float``
payload index on that field (checked at open()); local mode needs none and
parses ISO-8601 strings itself. Qdrant's order_by has no tie-breaker: records
with the same timestamp come in the engine's order. Points without the field
are not returned by order_by. Without ``mapping.created_at`` the order is the
point id ascending; newest-first then means the last ``limit`` ids, which
costs a scan of every matching point (kept in a bounded deque).

Errors are translated in ``connectors.qdrant.errors`` only: connection failures, 5xx and 429 ->
EngineUnavailable (retried, with Retry-After honoured in retry_after_ms),
timeouts -> EngineTimeout, other 4xx and refused requests -> EngineRejected,
a missing collection or vector, a 404, or refused credentials ->
EngineConfigError. Messages are fixed strings; the client's text (which can
name the URL) is logged at debug level only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Final

from connectors.base import EngineInfo, Filter, Hit, OrderedRequest, SearchRequest, SparseVector
from connectors.errors import EngineConfigError
from connectors.fusion import fuse
from connectors.qdrant.connect import server_client
from connectors.qdrant.layout import METRICS, inspect_collection
from connectors.qdrant.local import LocalClient, open_local
from connectors.qdrant.query import (
    MatchesNothing,
    Translated,
    has_prefix,
    translate_filter,
    with_ids,
)
from connectors.qdrant.reader import QdrantReader
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
    from qdrant_client import AsyncQdrantClient
    from qdrant_client.http import models

    from connectors.spec import ConnectorSpec

log = logging.getLogger(__name__)

ENCODE_INLINE_CHARS: Final = 512
"""Longer query texts are encoded on a worker thread. Measured (CPU): 0.23 ms at 512
characters, about what the hop to a thread costs; 1.8 ms at 4,000, which would stall
every other request on the loop."""


class QdrantConnector(QdrantReader):
    """One Qdrant collection behind one store. Nothing is contacted until :meth:`open`."""

    def __init__(self, spec: ConnectorSpec) -> None:
        super().__init__(spec)
        self._spec = spec
        self._local = spec.connection.url is None
        self._encoder = (
            LexicalSparseEncoder(analyzer=spec.search.sparse_analyzer)
            if spec.search.sparse_vector is not None
            else None
        )

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> EngineInfo:
        """Connect, check the collection and its vectors, and report what it holds.

        Raises:
            EngineConfigError: the collection, the configured dense or sparse vector,
                or a server's payload index on ``mapping.created_at`` is missing, or
                the dense vector's distance is not one A2M can name.
            LocalStorageLocked: another process holds the local-mode path.
            EngineUnavailable: the server cannot be reached.
            EngineTimeout: the server did not answer in time.
        """
        if self._client is None:
            self._client = self._make_client()
        try:
            info = await self._read(lambda c: c.get_collection(self._collection))
            self._layout = inspect_collection(info, self._spec, local=self._local)
            if self._local:
                from importlib.metadata import version

                engine = f"qdrant local mode (qdrant-client {version('qdrant-client')})"
            else:
                engine = f"qdrant {(await self._read(lambda c: c.info())).version}"
        except BaseException:
            # Local mode holds a lock on its path: never keep it after a failed open.
            await self.close()
            raise
        for need in self._layout.indexes:
            if not need.present:
                log.warning(
                    "qdrant collection has no %s payload index on %r (%s): %s",
                    " or ".join(need.kinds),
                    need.field,
                    need.purpose,
                    need.without,
                )
        return EngineInfo(
            engine=engine,
            vectors=self._layout.vectors,
            lexical=self._layout.sparse_name is not None,
            indexes=self._layout.indexes,
        )

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.close()
            except Exception as exc:  # closing must not mask the caller's own error
                log.debug("qdrant client close failed: %r", exc)

    async def ping(self) -> bool:
        """True when the collection answers; never raises."""
        client = self._client
        if client is None:
            return False
        if isinstance(client, LocalClient):
            # In-process: open is up. Asking would queue behind a running scan on the worker.
            return not client.closed
        try:
            async with asyncio.timeout(min(self._timeout_s, remaining(self._timeout_s))):
                return bool(await client.collection_exists(self._collection))
        except Exception as exc:  # a health probe reports, it does not raise
            log.debug("qdrant ping failed: %r", exc)
            return False

    def _make_client(self) -> AsyncQdrantClient:
        c = self._spec.connection
        if c.url is not None:
            return server_client(c, self._timeout_s)
        try:
            return open_local(c.path, c.location)
        except ValueError as exc:
            log.debug("qdrant client refused the connection settings: %s", exc)
            raise EngineConfigError("qdrant connection settings are invalid") from exc

    def local_client(self) -> AsyncQdrantClient:
        """The in-process client of a local-mode store, created on first use.

        For filling a ``:memory:`` collection before :meth:`open` (the embedded demo):
        that collection lives in this client only.

        Raises:
            EngineConfigError: the store points at a Qdrant server.
            LocalStorageLocked: another process holds the local-mode path.
        """
        if not self._local:
            raise EngineConfigError("a qdrant server store has no local client")
        if self._client is None:
            self._client = self._make_client()
        return self._client

    # -- reads -------------------------------------------------------------------------

    async def search(self, request: SearchRequest) -> list[Hit]:
        """Ranked hits, best first, scores in [0, 1].

        Raises:
            EngineRejected: the request asks for a leg the collection does not have.
            EngineUnavailable, EngineTimeout, EngineConfigError: see the module docstring.
        """
        try:
            tr = translate_filter(request.filter)
        except MatchesNothing:
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
        ranked = ranked_query(request, ranked_legs, tr.qfilter)  # the prefix's ids included
        response = await self._read(
            lambda c: c.query_points(
                self._collection,
                query=ranked.query,
                using=ranked.using,
                prefetch=ranked.prefetch,
                query_filter=tr.qfilter,
                limit=limit,
                with_payload=self._payload_fields or False,
                with_vectors=with_vectors,
                timeout=self._server_timeout(),
            )
        )
        points = [p for p in response.points if has_prefix(p.payload, tr.prefix)]
        scores = normalise(ranked.kind, self._layout, [p.score for p in points])
        # Ordered by the normalised score (a Euclid distance ranks low-first); a server
        # returns equal scores (common under RRF) in no fixed order: ties by id.
        best = sorted(
            zip(scores, points, strict=True),
            key=lambda sp: (-sp[0], isinstance(sp[1].id, str), sp[1].id),
        )[: request.limit]
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
        responses = await self._read(
            lambda c: c.query_batch_points(
                self._collection, requests=requests, timeout=self._server_timeout()
            )
        )
        lists: list[tuple[list[Hit], float]] = []
        for (kind, *_, weight), response in zip(ranked_legs, responses, strict=True):
            points = [p for p in response.points if has_prefix(p.payload, tr.prefix)]
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

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        """Hits in creation order (newest first when asked), at most ``limit``.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError.
        """
        try:
            tr = translate_filter(request.filter)
        except MatchesNothing:
            return []
        if request.limit <= 0:
            return []
        if self._created_at:
            records = await self._by_value(
                tr, request.limit, request.newest_first, request.with_vectors
            )
        elif request.newest_first:
            records = await self._last_by_id(tr, request.limit, request.with_vectors)
        else:
            records = await self._first_by_id(tr, request.limit, request.with_vectors)
        return [self._hit(r, request.with_vectors) for r in records]

    async def fetch(self, flt: Filter, with_vectors: bool = False) -> Hit | None:
        """The first point (by id) matching flt, or None.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError.
        """
        try:
            tr = translate_filter(flt)
        except MatchesNothing:
            return None
        records = await self._first_by_id(tr, 1, with_vectors)
        return self._hit(records[0], with_vectors) if records else None

    # -- helpers -----------------------------------------------------------------------

    async def _sparse(self, request: SearchRequest) -> SparseVector | None:
        """The lexical leg: the request's own sparse vector, else its text encoded here."""
        if request.sparse is not None or request.text is None or self._encoder is None:
            return request.sparse
        if len(request.text) <= ENCODE_INLINE_CHARS:
            return self._encoder.encode_query(request.text)
        # Off the loop; the request's deadline still bounds the wait.
        async with asyncio.timeout(remaining(self._timeout_s)):
            return await asyncio.to_thread(self._encoder.encode_query, request.text)

    def _hit(self, record: models.Record, with_vectors: bool) -> Hit:
        return Hit(
            id=str(record.id),
            source=dict(record.payload or {}),
            vector=vector_of(record.vector, self._layout) if with_vectors else None,
        )


__all__ = ["METRICS", "QdrantConnector"]
