"""Qdrant connector: one code path for a Qdrant server and Qdrant's engine in this process.

Where the store points (each an engine of ``connectors.qdrant.engine``):
  * ``connection.url`` (+ ``api_key``): a Qdrant server over REST or gRPC, through
    qdrant-client (``connectors.qdrant.server``; imported only for such a store). A
    URL without a port means 6333, qdrant-client's convention; write ``:443``
    behind a TLS proxy.
  * ``connection.path`` or ``connection.location: ":memory:"``: Qdrant's own engine
    in this process, qdrant-edge (``connectors.qdrant.edge``): the collection is the
    shard in ``<path>/<index>`` (``connectors.qdrant.shard``), or a private temporary
    shard for ``:memory:`` (the embedded demo). Its calls run on one worker thread
    off the event loop; a shard is open in one process at a time. A directory
    written by qdrant-client's local mode is refused with how to rebuild it.

Search (run in ``connectors.qdrant.searcher``, its legs and query built in
``connectors.qdrant.search``):
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
Without a text index on the key field Qdrant matches each word as a substring,
which is what the prefilter assumes; give the key field a full-text index with the
``word`` (or ``prefix``) tokenizer — a ``whitespace`` tokenizer would make the
prefilter drop matches.
Ordered reads and fetch page on until ``limit`` exact matches are found.
Search first resolves the prefix into point ids (a scroll reading only the
key field, at most 10,000 points and 2,000 matches) and ranks with a
``has_id`` filter, which is exact; a broader prefix falls back to
over-fetching ``candidates`` and post-filtering, which can return fewer than
``limit`` hits when few of those candidates carry the prefix.

Ordered reads use ``scroll`` with ``order_by`` on ``mapping.created_at``, which
needs a ``datetime`` (ISO-8601 payloads), ``integer`` or ``float`` payload index
on that field (checked at open(), on either engine). Qdrant's order_by has no
tie-breaker: records with the same timestamp are put in id order within the
window read. Points without the field
are not returned by order_by. Without ``mapping.created_at`` the order is the
point id ascending; newest-first then means the last ``limit`` ids, which
costs a scan of every matching point (kept in a bounded deque).

Errors are translated in ``connectors.qdrant.errors`` (server) and
``connectors.qdrant.edge`` (in process) only: connection failures, 5xx and 429 ->
EngineUnavailable (retried, with Retry-After honoured in retry_after_ms),
timeouts -> EngineTimeout, other 4xx and refused requests -> EngineRejected,
a missing collection or vector, a 404, or refused credentials ->
EngineConfigError; an answer that is not Qdrant's (a proxy's page, an empty, non-JSON
or still compressed body, a redirect, a status Qdrant never sends; checked in
``connectors.qdrant.answers``) -> EngineAnswerInvalid saying what came back, retried
like an unreachable server. Messages are fixed strings; the client's text (which can
name the URL) is logged at debug level only.

A server store's REST requests go through an httpx transport given to the connector
(``QdrantConnector(spec, transport=httpx.MockTransport(handler))``), else sockets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from connectors.base import EngineInfo, Filter, Hit, OrderedRequest
from connectors.errors import EngineConfigError
from connectors.qdrant.engine import Engine
from connectors.qdrant.layout import METRICS, inspect_collection
from connectors.qdrant.query import UnsatisfiableFilter, translate_filter
from connectors.qdrant.search import vector_of
from connectors.qdrant.searcher import ENCODE_INLINE_CHARS, QdrantSearcher
from connectors.retry import remaining

if TYPE_CHECKING:
    import httpx

    from connectors.qdrant.spec import QdrantSpec

log = logging.getLogger(__name__)


class QdrantConnector(QdrantSearcher):
    """One Qdrant collection behind one store. Nothing is contacted until :meth:`open`."""

    def __init__(self, spec: QdrantSpec, transport: httpx.AsyncBaseTransport | None = None) -> None:
        """``transport``: what a server store's REST requests go through (an httpx
        transport, e.g. ``httpx.MockTransport(handler)`` in a unit test); sockets when
        None. Unused by gRPC and by a store in this process.
        """
        super().__init__(spec)
        self._spec = spec
        self._local = spec.connection.local
        self._transport = transport

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> EngineInfo:
        """Connect, check the collection and its vectors, and report what it holds.

        Raises:
            EngineConfigError: the collection, the configured dense or sparse vector,
                or a payload index on ``mapping.created_at`` is missing, the dense
                vector's distance is not one A2M can name, or ``connection.path`` holds
                qdrant-client local mode's files instead of a qdrant-edge shard.
            LocalStorageLocked: another process holds the shard.
            EngineUnavailable: the server cannot be reached.
            EngineTimeout: the server did not answer in time.
        """
        if self._client is None:
            self._client = self._make_client()
        try:
            shape = await self._read(lambda c: c.get_collection())
            self._layout = inspect_collection(shape, self._spec)
            engine = self._client.engine_name
        except BaseException:
            # An in-process shard is locked while open: never keep it after a failed open.
            await self.close()
            raise
        # A ``:memory:`` shard is written by this process itself (the demo), which chose
        # what to index for its size: nothing to tell the operator.
        in_memory = self._spec.connection.location == ":memory:"
        for need in self._layout.indexes:
            if not need.present and not in_memory:
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
        try:
            async with asyncio.timeout(min(self._timeout_s, remaining(self._timeout_s))):
                return await client.ping()
        except Exception as exc:  # a health probe reports, it does not raise
            log.debug("qdrant ping failed: %r", exc)
            return False

    def _make_client(self) -> Engine:
        c = self._spec.connection
        if c.url is not None:
            from connectors.qdrant.server import ServerEngine

            return ServerEngine(c, self._collection, self._timeout_s, self._transport)
        from connectors.qdrant.edge import EdgeEngine
        from connectors.qdrant.shard import memory_root, shard_dir

        if c.path is not None:
            return EdgeEngine(shard_dir(c.path, self._collection), where=c.path)
        if c.location != ":memory:":
            raise EngineConfigError("qdrant connection.location must be ':memory:'")
        root = memory_root()
        return EdgeEngine(shard_dir(root, self._collection), where=root, temporary=True)

    def local_shard_path(self) -> str:
        """The directory of an in-process store's shard, its engine created on first use.

        For writing the shard of a ``:memory:`` store before :meth:`open` (the embedded
        demo): that directory is private to this connector and removed at close.

        Raises:
            EngineConfigError: the store points at a Qdrant server.
        """
        from connectors.qdrant.edge import EdgeEngine

        if not self._local:
            raise EngineConfigError("a qdrant server store has no in-process shard")
        if self._client is None:
            self._client = self._make_client()
        assert isinstance(self._client, EdgeEngine)
        return self._client.path

    # -- ordered reads and fetch ---------------------------------------------------------

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        """Hits in creation order (newest first when asked), at most ``limit``.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError.
        """
        try:
            tr = translate_filter(request.filter)
        except UnsatisfiableFilter:
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
        except UnsatisfiableFilter:
            return None
        records = await self._first_by_id(tr, 1, with_vectors)
        return self._hit(records[0], with_vectors) if records else None

    # -- helpers -----------------------------------------------------------------------

    def _hit(self, record: Any, with_vectors: bool) -> Hit:
        return Hit(
            id=str(record.id),
            source=dict(record.payload or {}),
            vector=vector_of(record.vector, self._layout) if with_vectors else None,
        )


__all__ = ["ENCODE_INLINE_CHARS", "METRICS", "QdrantConnector"]
