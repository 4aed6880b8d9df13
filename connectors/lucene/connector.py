"""The engine-neutral async connector Elasticsearch and OpenSearch share.

A dialect subclass (``connectors.lucene.elasticsearch``, ``connectors.lucene.opensearch``)
supplies the client, the kNN clause, the vector mapping and the client's
exception shapes; everything else lives here once. Bodies come from
:mod:`connectors.lucene.query`, field checks from :mod:`connectors.lucene.mapping`,
hybrid legs (one ``_msearch``) from :mod:`connectors.lucene.hybrid`, ordered reads
and their paging from :mod:`connectors.lucene.order`.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from connectors.base import (
    EngineInfo,
    Filter,
    Hit,
    OrderedRequest,
    SearchRequest,
    VectorInfo,
)
from connectors.errors import EngineConfigError, EngineRejected
from connectors.fusion import normalise_by_max
from connectors.lucene.client import LuceneClient, msearch_responses
from connectors.lucene.hybrid import (
    HybridPlanner,
    knn_depth,
    msearch_lines,
    reread_body,
    with_documents,
)
from connectors.lucene.mapping import (
    check_fields,
    flatten_mapping,
    keyword_subfields,
    text_only_fields,
)
from connectors.lucene.order import (
    ES_ENGINE_ID_ORDER,
    EngineIdOrder,
    OrderedBodies,
    OrderedReader,
)
from connectors.lucene.query import MAX_WINDOW, PAGE_SIZE, Body, QueryTranslator

if TYPE_CHECKING:
    from connectors.spec import ConnectorSpec

logger = logging.getLogger(__name__)


class LuceneConnector(LuceneClient):
    """An Elasticsearch/OpenSearch index behind one store (see :class:`connectors.base.Connector`).

    Subclasses are small dialects: the client, the kNN clause, the vector field
    type and its similarity, the PIT calls and the client's exception shapes.
    """

    vector_type: ClassVar[str]
    engine_id_order: ClassVar[EngineIdOrder] = ES_ENGINE_ID_ORDER

    def __init__(self, spec: ConnectorSpec, *, page_size: int = PAGE_SIZE) -> None:
        """Nothing is contacted until open(); ``page_size`` bounds one ordered-read request."""
        super().__init__(spec)
        self._page_size = max(1, min(page_size, MAX_WINDOW))
        self._translator: QueryTranslator | None = None
        self._vector_spec: dict[str, Any] | None = None
        self._order: OrderedBodies | None = None
        self._hybrid: HybridPlanner | None = None

    # ---- dialect hooks

    @abc.abstractmethod
    def _knn_body(
        self, translator: QueryTranslator, request: SearchRequest, size: int, depth: int
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
        await self._connect()
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
            t = self._translator = QueryTranslator(
                self._spec, exact_fields=exact, text_only_fields=text_only_fields(fields, exact)
            )
            self._order = OrderedBodies(t, self.engine_id_order)
            group = self._spec.fields.group if t.collapse_field else None
            self._hybrid = HybridPlanner(t, self._knn_body, self._knn_score, group_field=group)
            try:
                version = await self._version(self._call_timeout())
            except Exception:  # the version is cosmetic: never fail open() for it
                version = None
        except BaseException:
            await self.close()
            raise
        name = f"{self.engine_name} {version}" if version else self.engine_name
        return EngineInfo(engine=name, vectors=vectors, lexical=bool(self._spec.search.text_fields))

    async def search(self, request: SearchRequest) -> list[Hit]:
        """Ranked hits, best first, scores in [0, 1]; text + vector are fused by weighted RRF.

        A hybrid search sends both legs in one ``_msearch``, fused here; deep legs
        return ids only and the fused page is re-read (:mod:`connectors.lucene.hybrid`).

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
            return await self._hybrid_search(request, limit)
        if lexical:
            response = await self._search_read(t.lexical(request, limit))
            return normalise_by_max(t.hits(response, with_vectors=request.with_vectors))
        if dense:
            body = self._knn_body(t, request, limit, knn_depth(request, limit))
            hits = t.hits(await self._search_read(body), with_vectors=request.with_vectors)
            for h in hits:
                h.score = self._knn_score(h.score) if h.score is not None else 0.0
            return hits
        raise EngineRejected("a search needs query text or a query vector")

    async def _hybrid_search(self, request: SearchRequest, limit: int) -> list[Hit]:
        """One ``_msearch`` of the legs, fused; then the re-read when the plan needs it."""
        assert self._hybrid is not None
        plan = self._hybrid.plan(request, limit)
        lines = msearch_lines([leg.body for leg in plan.legs])

        async def call(seconds: float) -> list[dict[str, Any]]:
            return msearch_responses(await self._msearch(lines, seconds), len(plan.legs))

        fused = self._hybrid.fuse(plan.legs, await self._read(call), request, limit)
        if not plan.reread or not fused:
            return fused
        body = reread_body(self._t, fused, request.filter, with_vectors=request.with_vectors)
        docs = self._t.hits(await self._search_read(body), with_vectors=request.with_vectors)
        return with_documents(fused, docs)

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        """Hits in (created_at, tie-break) order, newest first when asked, read in pages.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError: see :meth:`_read`.
        """
        assert self._order is not None, "the connector is not open"
        reader = OrderedReader(
            self._order,
            self._t,
            page_size=self._page_size,
            search_page=self._search_read,
            open_pit=lambda: self._read(self._open_pit),
            release_pit=self._release_pit,
        )
        return await reader.read(request)

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
        assert self._order is not None, "the connector is not open"
        response = await self._search_read(self._order.fetch(flt, with_vectors=with_vectors))
        hits = self._t.hits(response, with_vectors=with_vectors)
        if not hits:
            return None
        hits[0].score = None
        return hits[0]
