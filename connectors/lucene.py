"""The engine-neutral async connector Elasticsearch and OpenSearch share.

A dialect subclass (``connectors.elasticsearch``, ``connectors.opensearch``)
supplies the client, the kNN clause, the vector mapping and the client's
exception shapes; everything else lives here once. Bodies come from
:mod:`connectors.lucene_query`, field checks from :mod:`connectors.lucene_mapping`,
fusion from :mod:`connectors.fusion`.
"""

from __future__ import annotations

import abc
import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from connectors.base import (
    EngineInfo,
    Filter,
    Hit,
    OrderedRequest,
    SearchRequest,
    VectorInfo,
    value_at,
)
from connectors.errors import (
    ConnectorError,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    QueryTooLarge,
)
from connectors.fusion import fuse_rrf, normalise_by_max
from connectors.lucene_mapping import (
    check_fields,
    flatten_mapping,
    keyword_subfields,
    text_only_fields,
)
from connectors.lucene_query import (
    ES_ENGINE_ID_ORDER,
    MAX_WINDOW,
    PAGE_SIZE,
    Body,
    EngineIdOrder,
    QueryTranslator,
)
from connectors.retry import remaining, retry_read
from connectors.tracing import trace_transport

if TYPE_CHECKING:
    from connectors.spec import ConnectorSpec

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
_TOO_LARGE = frozenset({"too_many_clauses", "too_many_nested_clauses"})
"""Root causes that mean the query itself is too large, whatever the status."""


@dataclass(frozen=True, slots=True)
class EngineFailure:
    """A client exception reduced to what the connector decides on."""

    kind: Literal["connection", "timeout", "status"]
    status: int | None = None
    retry_after_ms: int | None = None
    causes: frozenset[str] = frozenset()
    """The error types the engine named (``error.type``, ``root_cause``, ``caused_by``)."""

    @property
    def too_large(self) -> bool:
        return bool(self.causes & _TOO_LARGE)

    @property
    def transient(self) -> bool:
        """Worth retrying: the engine was unreachable or said 'busy'. Timeouts are not
        retried: the deadline is mostly spent by then; nor is a query too large."""
        if self.too_large:
            return False
        return self.kind == "connection" or self.status in _TRANSIENT_STATUS

    def error(self, *, opening: bool = False) -> ConnectorError:
        """The engine-neutral exception; fixed messages, no hosts or credentials."""
        retry_after = self.retry_after_ms if self.retry_after_ms is not None else 1000
        if self.kind == "timeout":
            return EngineTimeout("the engine did not answer in time")
        if self.kind == "connection":
            return EngineUnavailable("the engine cannot be reached", retry_after_ms=retry_after)
        if self.too_large:
            return QueryTooLarge("the engine refused the query as too large")
        status = self.status or 0
        if status == 429:
            return EngineUnavailable("the engine is overloaded", retry_after_ms=retry_after)
        if status >= 500:
            return EngineUnavailable(
                f"the engine failed (HTTP {status})", retry_after_ms=retry_after
            )
        if status == 404:
            return EngineConfigError("index: the index does not exist in the engine")
        if status in (401, 403):
            if opening:
                return EngineConfigError(
                    "connection: the engine refused the credentials, or they lack the "
                    "read and view_index_metadata privileges on the index"
                )
            return EngineRejected(f"the engine refused the credentials (HTTP {status})")
        return EngineRejected(f"the engine rejected the query (HTTP {status})")


def error_causes(body: Any) -> frozenset[str]:
    """The error types in an engine's error body: its type, root causes and causes, nested."""
    out: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > 8:
            return
        if isinstance(node.get("type"), str):
            out.add(node["type"])
        for cause in node.get("root_cause") or []:
            walk(cause, depth + 1)
        walk(node.get("caused_by"), depth + 1)
        for failed in node.get("failed_shards") or []:
            walk(failed.get("reason") if isinstance(failed, Mapping) else None, depth + 1)

    if isinstance(body, Mapping):
        walk(body.get("error"), 0)
    return frozenset(out)


def retry_after_ms(headers: Mapping[str, str] | None) -> int | None:
    """The ``Retry-After`` header (seconds) in milliseconds, when the engine sent one."""
    if not headers:
        return None
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0, int(float(value) * 1000))
            except ValueError:
                return None
    return None


class LuceneConnector(abc.ABC):
    """An Elasticsearch/OpenSearch index behind one store (see :class:`connectors.base.Connector`).

    Subclasses are small dialects: the client, the kNN clause, the vector field
    type and its similarity, the PIT calls and the client's exception shapes.
    """

    engine_name: ClassVar[str]
    vector_type: ClassVar[str]
    engine_id_order: ClassVar[EngineIdOrder] = ES_ENGINE_ID_ORDER

    def __init__(self, spec: ConnectorSpec, *, page_size: int = PAGE_SIZE) -> None:
        """Nothing is contacted until open(); ``page_size`` bounds one ordered-read request."""
        self._spec = spec
        self._page_size = max(1, min(page_size, MAX_WINDOW))
        self._timeout_s = spec.connection.timeout_ms / 1000
        self._client: Any = None
        self._view = False
        self._translator: QueryTranslator | None = None
        self._vector_spec: dict[str, Any] | None = None

    # ---- dialect hooks

    async def _prepare(self) -> None:  # noqa: B027 - optional hook, most dialects need none
        """Blocking set-up the client needs (credential lookups), run before _make_client.

        A dialect runs the blocking part on a worker thread (``asyncio.to_thread``).
        """

    @abc.abstractmethod
    def _make_client(self) -> Any:
        """Build the async client (no I/O).

        Raises:
            EngineConfigError: the connection settings cannot make a client.
        """

    @abc.abstractmethod
    async def _close_client(self, client: Any) -> None: ...

    @abc.abstractmethod
    def _classify(self, exc: BaseException) -> EngineFailure | None:
        """Reduce a client exception; None for anything that is not the client's."""

    @abc.abstractmethod
    async def _search(self, body: Body, seconds: float, *, pit: bool = False) -> dict[str, Any]:
        """Run one ``_search`` (on the index, or on the PIT named in the body)."""

    @abc.abstractmethod
    async def _get_mapping(self, seconds: float) -> dict[str, Any]: ...

    @abc.abstractmethod
    async def _health(self, seconds: float) -> None: ...

    @abc.abstractmethod
    async def _version(self, seconds: float) -> str | None:
        """The engine version, best effort (None when the engine does not say)."""

    @abc.abstractmethod
    async def _open_pit(self, seconds: float) -> str: ...

    @abc.abstractmethod
    async def _close_pit(self, pit_id: str, seconds: float) -> None: ...

    @abc.abstractmethod
    def _knn_body(
        self,
        translator: QueryTranslator,
        request: SearchRequest,
        size: int,
        depth: int,
        *,
        ids_only: bool = False,
    ) -> Body:
        """A kNN search body: ``size`` nearest hits, searching ``depth`` candidates."""

    @abc.abstractmethod
    def _vector_info(self, spec: Mapping[str, Any]) -> VectorInfo:
        """Dimensions and metric of the vector field's mapping.

        Raises:
            EngineConfigError: the field cannot be searched by kNN or its metric is unsupported.
        """

    @abc.abstractmethod
    def _knn_score(self, raw: float) -> float:
        """The engine's kNN ``_score`` for the field's similarity, mapped into [0, 1]."""

    # ---- plumbing

    def _call_timeout(self) -> float:
        """Per-call client timeout: the connection's, cut to what the request deadline leaves.

        Raises:
            EngineTimeout: the deadline has already passed.
        """
        left = remaining(default=self._timeout_s)
        if left <= 0:
            raise EngineTimeout("the engine did not answer in time")
        return min(self._timeout_s, left)

    def _is_transient(self, exc: BaseException) -> bool:
        failure = self._classify(exc)
        return failure is not None and failure.transient

    async def _read(self, call: Callable[[float], Awaitable[T]], *, opening: bool = False) -> T:
        """Run an idempotent read with retries, translating the client's exceptions.

        Raises:
            EngineUnavailable: unreachable, or 429/5xx after retries.
            EngineTimeout: the call or the request deadline timed out.
            EngineRejected: any other 4xx.
            EngineConfigError: the index is missing (404), or refused credentials at open().
        """

        if self._client is None:
            # Closed (or a failed open()): the store must reopen before reading.
            raise EngineUnavailable("the connector is closed", retry_after_ms=1000)

        async def attempt() -> T:
            return await call(self._call_timeout())

        try:
            return await retry_read(
                attempt, transient=self._is_transient, attempts=self._spec.connection.retries
            )
        except ConnectorError:
            raise
        except Exception as exc:
            failure = self._classify(exc)
            if failure is None:
                raise
            # The client's text can hold URLs and index names: debug level only.
            logger.debug("engine call failed: %s", failure, exc_info=True)
            raise failure.error(opening=opening) from exc

    @property
    def _t(self) -> QueryTranslator:
        if self._translator is None:
            raise RuntimeError("the connector is not open")
        return self._translator

    # ---- Connector protocol

    async def open(self) -> EngineInfo:
        """Connect, read the index mapping, check the configured fields against it.

        Raises:
            EngineConfigError: the index or a configured field is missing or unusable
                (the message names the config key), or the credentials were refused.
            EngineUnavailable: the engine cannot be reached.
            EngineTimeout: it did not answer in time.
        """
        if self._client is None:
            await self._prepare()
            self._client = self._make_client()
            trace_transport(self._client.transport, self.engine_name, self._spec.index)
        try:
            mapping = await self._read(self._get_mapping, opening=True)
            fields = flatten_mapping(mapping)
            if not fields and not mapping:
                raise EngineConfigError("index: the index does not exist in the engine")
            exact = keyword_subfields(fields)
            self._vector_spec = check_fields(
                self._spec, fields, exact, vector_type=self.vector_type
            )
            vectors = self._vector_info(self._vector_spec) if self._vector_spec else None
            self._translator = QueryTranslator(
                self._spec,
                exact_fields=exact,
                text_only_fields=text_only_fields(fields, exact),
                engine_id_order=self.engine_id_order,
            )
            try:
                version = await self._version(self._call_timeout())
            except Exception:  # the version is cosmetic: never fail open() for it
                version = None
        except BaseException:
            await self.close()
            raise
        name = f"{self.engine_name} {version}" if version else self.engine_name
        return EngineInfo(engine=name, vectors=vectors, lexical=bool(self._spec.search.text_fields))

    async def close(self) -> None:
        if self._view:
            return  # a caller's view shares its parent's client; the parent closes it
        client, self._client = self._client, None
        if client is not None:
            await self._close_client(client)

    def for_caller(self, authorization: str) -> LuceneConnector:
        """A view of this open connector whose engine requests carry the caller's
        ``Authorization`` instead of the store's credential (``scope.forward_credential``):
        the engine's own document-level security then decides what the caller sees.
        It shares the client's connection pool and what open() learned; no I/O.

        Raises:
            EngineUnavailable: the connector is not open.
        """
        if self._client is None:
            raise EngineUnavailable("engine connector is closed")
        view = copy.copy(self)
        view._view = True
        view._client = self._client_with_authorization(authorization)
        return view

    def _client_with_authorization(self, authorization: str) -> Any:
        """The dialect's client sending ``authorization`` on every request."""
        raise NotImplementedError

    async def ping(self) -> bool:
        """True when the engine answers HTTP (even a 4xx: it is up); never raises.

        Not open, or closed: False, and no client is built (it would leak a pool).
        """
        if self._client is None:
            return False
        try:
            await self._health(min(self._timeout_s, 5.0))
        except Exception as exc:  # ping never raises; classify what the client threw
            failure = self._classify(exc)
            return failure is not None and failure.kind == "status" and (failure.status or 0) < 500
        return True

    async def search(self, request: SearchRequest) -> list[Hit]:
        """Ranked hits, best first, scores in [0, 1]; text + vector are fused by weighted RRF.

        Raises:
            EngineRejected: a sparse vector (Qdrant only) or neither text nor vector.
            EngineConfigError: the store lacks the fields the request needs.
            EngineUnavailable, EngineTimeout: see :meth:`_read`.
        """
        t = self._t
        if request.sparse is not None:
            raise EngineRejected("sparse vectors are not supported by this engine")
        lexical = request.text is not None
        dense = request.dense is not None
        if dense and self._vector_spec is None:
            raise EngineConfigError("search.vector_field: vector search needs a vector field")
        limit = max(0, min(request.limit, MAX_WINDOW))
        if limit == 0:
            return []
        if lexical and dense:
            depth = min(max(request.candidates, limit), MAX_WINDOW)
            legs: list[tuple[Awaitable[list[Hit]], float]] = []
            lw, dw = request.lexical_weight, request.dense_weight
            both = (lw > 0 and dw > 0) or (lw <= 0 and dw <= 0)
            # Legs return ids and scores only: 2 x depth documents would otherwise
            # travel for the `limit` that survive fusion.
            if both or lw > 0:
                legs.append((self._lexical(request, depth, ids_only=True), lw))
            if both or dw > 0:
                legs.append((self._knn(request, depth, depth, ids_only=True), dw))
            results = await _gather([leg for leg, _ in legs])
            group = self._spec.fields.group if t.collapse_field else None
            fused = fuse_rrf(
                [(hits, w) for hits, (_, w) in zip(results, legs, strict=True)],
                k=request.rrf_k,
                limit=limit,
                group_of=(lambda h: value_at(h.source, group)) if group else None,
            )
            return await self._with_documents(
                fused, request.filter, with_vectors=request.with_vectors
            )
        if lexical:
            return await self._lexical(request, limit)
        if dense:
            depth = min(max(request.candidates, limit), MAX_WINDOW)
            return await self._knn(request, limit, depth)
        raise EngineRejected("a search needs query text or a query vector")

    async def _with_documents(
        self, hits: list[Hit], flt: Filter, *, with_vectors: bool
    ) -> list[Hit]:
        """Fill fused hits with their documents in one query under ``flt``; keeps the order."""
        if not hits:
            return hits
        body = self._t.by_ids(hits, flt, with_vectors=with_vectors)
        response = await self._read(lambda seconds: self._search(body, seconds))
        docs = {d.identity: d for d in self._t.hits(response, with_vectors=with_vectors)}
        out: list[Hit] = []
        for h in hits:
            doc = docs.get(h.identity)
            if doc is None:
                continue  # deleted between the two reads
            h.source, h.vector = doc.source, doc.vector
            out.append(h)
        return out

    async def _lexical(
        self, request: SearchRequest, size: int, *, ids_only: bool = False
    ) -> list[Hit]:
        body = self._t.lexical(request, size, ids_only=ids_only)
        response = await self._read(lambda seconds: self._search(body, seconds))
        return normalise_by_max(self._t.hits(response, with_vectors=request.with_vectors))

    async def _knn(
        self, request: SearchRequest, size: int, depth: int, *, ids_only: bool = False
    ) -> list[Hit]:
        body = self._knn_body(self._t, request, size, depth, ids_only=ids_only)
        response = await self._read(lambda seconds: self._search(body, seconds))
        hits = self._t.hits(response, with_vectors=request.with_vectors)
        for h in hits:
            h.score = self._knn_score(h.score) if h.score is not None else 0.0
        return hits

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        """Hits in (created_at, tie-break) order, newest first when asked, read in pages.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError: see :meth:`_read`.
        """
        t = self._t
        limit = max(0, request.limit)
        if not t.order.search_after:
            limit = min(limit, MAX_WINDOW)  # `from` paging ends at the result window
        if limit == 0:
            return []
        use_pit = t.order.pit
        pit_id = await self._read(self._open_pit) if use_pit else None
        try:
            hits: list[Hit] = []
            after: list[Any] | None = None
            while len(hits) < limit:
                size = min(self._page_size, limit - len(hits))
                body = t.ordered_page(
                    request,
                    size,
                    search_after=after,
                    offset=0 if t.order.search_after else len(hits),
                    pit_id=pit_id,
                )
                response = await self._read(self._page_call(body, use_pit))
                pit_id = response.get("pit_id", pit_id)
                page = response.get("hits", {}).get("hits", [])
                for h in t.hits(response, with_vectors=request.with_vectors):
                    h.score = None
                    hits.append(h)
                if len(page) < size:
                    break
                if t.order.search_after:
                    after = page[-1]["sort"]
            return hits
        finally:
            if pit_id is not None:
                await self._release_pit(pit_id)

    def _page_call(self, body: Body, pit: bool) -> Callable[[float], Awaitable[dict[str, Any]]]:
        async def call(seconds: float) -> dict[str, Any]:
            return await self._search(body, seconds, pit=pit)

        return call

    async def _release_pit(self, pit_id: str) -> None:
        # Best effort: an unreleased PIT expires after PIT_KEEP_ALIVE anyway.
        try:
            await self._close_pit(pit_id, min(self._timeout_s, 5.0))
        except Exception as exc:
            if self._classify(exc) is None:
                raise
            logger.debug("closing a point in time failed", exc_info=True)

    async def fetch(self, flt: Filter, with_vectors: bool = False) -> Hit | None:
        """The first document matching ``flt`` (the newest when created_at is mapped).

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError: see :meth:`_read`.
        """
        body = self._t.fetch(flt, with_vectors=with_vectors)
        response = await self._read(lambda seconds: self._search(body, seconds))
        hits = self._t.hits(response, with_vectors=with_vectors)
        if not hits:
            return None
        hits[0].score = None
        return hits[0]


async def _gather(calls: Sequence[Awaitable[list[Hit]]]) -> list[list[Hit]]:
    """Run the legs concurrently; on the first failure cancel the others and re-raise it."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
