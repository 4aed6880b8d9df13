"""The async connector Elasticsearch and OpenSearch share: one class, two dialects.

What the engines do differently is a :class:`connectors.lucene.dialect.Dialect`
value (:data:`connectors.lucene.elasticsearch.ELASTICSEARCH`,
:data:`connectors.lucene.opensearch.OPENSEARCH`); everything else lives here
once. Bodies come from :mod:`connectors.lucene.query`, field checks from
:mod:`connectors.lucene.mapping`, hybrid legs (one ``_msearch``) from
:mod:`connectors.lucene.hybrid`, the highlighter's passages from
:mod:`connectors.lucene.passages`, ordered reads and their paging from
:mod:`connectors.lucene.order` (their points in time from :mod:`connectors.lucene.pit`),
retries and errors from :mod:`connectors.lucene.client`.
"""

from __future__ import annotations

import copy
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote

import orjson

from connectors.base import EngineInfo, Filter, Hit, OrderedRequest, SearchRequest, VectorInfo
from connectors.errors import EngineConfigError, EngineRejected
from connectors.fusion import normalise_by_max
from connectors.lucene.client import LuceneClient
from connectors.lucene.dialect import Dialect, KnnScore
from connectors.lucene.failures import msearch_responses
from connectors.lucene.hybrid import (
    HybridPlanner,
    knn_depth,
    knn_hits,
    msearch_lines,
    reread_body,
    with_documents,
)
from connectors.lucene.mapping import (
    check_fields,
    flatten_mapping,
    keyword_subfields,
    not_indexed,
    text_only_fields,
)
from connectors.lucene.nested import check_nested, check_nested_version
from connectors.lucene.order import OrderedBodies, OrderedReader
from connectors.lucene.passages import ANALYSED_CHARS, ANALYSED_SETTING, analysed_bound
from connectors.lucene.pit import open_pit, release_pit
from connectors.lucene.query import MAX_WINDOW, PAGE_SIZE, Body, QueryTranslator, parse_text_fields

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from connectors.engine_transport import TransportFactory
    from connectors.lucene.spec import LuceneSpec


logger = logging.getLogger(__name__)


def dialect_for(backend: str, transport: TransportFactory | None = None) -> Dialect:
    """A fresh dialect of ``backend`` (``elasticsearch`` or ``opensearch``), one per
    connector, its client sending through ``transport`` when given (else sockets).

    Raises:
        ValueError: another backend.
    """
    if backend == "elasticsearch":
        from connectors.lucene.elasticsearch import ElasticsearchDialect

        return ElasticsearchDialect(transport=transport)
    if backend == "opensearch":
        from connectors.lucene.opensearch import OpenSearchDialect

        return OpenSearchDialect(transport=transport)
    raise ValueError(f"not a Lucene backend: {backend!r}")


def knn_body(
    dialect: Dialect,
    translator: QueryTranslator,
    field: str,
    request: SearchRequest,
    size: int,
    depth: int,
) -> Body:
    """A kNN search body: ``size`` nearest hits, searching ``depth`` candidates.

    ``k`` is the depth and ``size`` cuts: OpenSearch has no ``num_candidates`` (k is
    its per-shard depth), and Elasticsearch 9.x rescores oversample x k quantised
    candidates, so a smaller k would rank a kNN-only search differently (worse)
    than the same query's hybrid leg.
    """
    assert request.dense is not None
    body = translator.knn_common(request, size)
    vector = [float(x) for x in request.dense]
    filters = translator.filter_clauses(request.filter)
    k = max(depth, size)
    nested = translator.nested
    if nested is None:
        body.update(dialect.knn_clause(field, vector, k, filters))
    else:
        inner = translator.inner_hits(request)
        body.update(dialect.nested_knn_clause(nested.path, field, vector, k, filters, inner))
    return body


def ndjson(lines: Sequence[Body]) -> bytes:
    """Lines of JSON, each ended by a newline (an ``_msearch`` payload)."""
    dumps, option = orjson.dumps, orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
    return b"".join(dumps(line, option=option) for line in lines)


async def engine_version(engine: LuceneClient, dialect: Dialect) -> str | None:
    """The engine's version for EngineInfo, or None when it cannot be read."""
    call = dialect.version
    try:
        answer = await engine.call("GET", call.path, engine.call_timeout(), params=call.params)
        return call.read(answer)
    except Exception:  # the version is cosmetic: never fail open() for it
        return None


async def analysed_chars(engine: LuceneClient, path: str) -> int:
    """The highlighter's bound for the indices of the settings ``path``
    (:func:`connectors.lucene.passages.analysed_bound`); the engines' default when their
    settings cannot be read (never raises)."""
    params = {"include_defaults": "true", "flat_settings": "true"}
    try:
        answer = await engine.call("GET", path, engine.call_timeout(), params=params)
    except Exception:  # a bound below the index's is what matters; the default is one
        logger.debug("the index's highlight bound could not be read", exc_info=True)
        return ANALYSED_CHARS
    return analysed_bound(answer)


class LuceneConnector:
    """An Elasticsearch/OpenSearch index behind one store (a :class:`connectors.base.Connector`)."""

    def __init__(
        self,
        spec: LuceneSpec,
        dialect: Dialect | None = None,
        *,
        page_size: int = PAGE_SIZE,
        transport: TransportFactory | None = None,
    ) -> None:
        """Nothing is contacted until open(); the dialect is the spec's backend's unless
        given; ``page_size`` bounds one ordered-read request; ``transport`` is what the
        engine client sends through (:class:`connectors.engine_transport.MockTransport`
        in a unit test), sockets unless given."""
        dialect = dialect or dialect_for(spec.backend, transport)
        self._spec = spec
        self._dialect = dialect
        self._engine = LuceneClient(spec, dialect)
        self._page_size = max(1, min(page_size, MAX_WINDOW))
        index = quote(spec.index, safe=",*")
        self._search_path = f"/{index}/_search"
        self._msearch_path = f"/{index}/_msearch"
        self._mapping_path = f"/{index}/_mapping"
        self._settings_path = f"/{index}/_settings/{ANALYSED_SETTING}"
        self._pit_path = dialect.pit.open_path.format(index=index)
        self._translator: QueryTranslator | None = None
        self._vector_field: str | None = None
        self._knn_score: KnnScore | None = None
        self._order: OrderedBodies | None = None
        self._hybrid: HybridPlanner | None = None

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    @property
    def _t(self) -> QueryTranslator:
        if self._translator is None:
            raise RuntimeError("the connector is not open")
        return self._translator

    # ---- Connector protocol

    async def connect(self) -> None:
        """Make the client without any engine request (open() does this first).

        Raises:
            EngineConfigError: the connection settings cannot make a client.
        """
        await self._engine.connect()

    async def open(self) -> EngineInfo:
        """Connect, read the index mapping, check the configured fields against it.

        Raises:
            EngineConfigError: the index or a configured field is missing or unusable
                (the message names the config key), or the credentials were refused.
            EngineUnavailable: the engine cannot be reached.
            EngineTimeout: it did not answer in time.
        """
        await self._engine.connect()
        try:
            mapping = await self._engine.read_call("GET", self._mapping_path, opening=True)
            analysed = ANALYSED_CHARS
            if self._highlights():
                analysed = await analysed_chars(self._engine, self._settings_path)
            vectors = self._learn(dict(mapping), analysed)
            version = await engine_version(self._engine, self._dialect)
            if self._spec.search.nested is not None:
                check_nested_version(self._dialect.name, version, self._dialect.nested_knn_since)
        except BaseException:
            await self.close()
            raise
        name = self._dialect.name
        name = f"{name} {version}" if version else name
        return EngineInfo(engine=name, vectors=vectors, lexical=bool(self._spec.search.text_fields))

    def _highlights(self) -> bool:
        """Searches carry a highlight clause (passages, or a single fragment)."""
        search = self._spec.search
        return bool(self._spec.fields.content) and bool(search.passages or search.highlight)

    def _learn(self, mapping: dict[str, Any], analysed: int = ANALYSED_CHARS) -> VectorInfo | None:
        """Check the fields against the mapping; set up the translator (highlighting at most
        ``analysed`` characters of a content) and planners."""
        fields = flatten_mapping(mapping)
        if not fields and not mapping:
            raise EngineConfigError("index: the index does not exist in the engine")
        exact = keyword_subfields(fields)
        field_spec = check_fields(self._spec, fields, exact, vector_type=self._dialect.vector_type)
        nested, vector_field = self._spec.search.nested, self._spec.search.vector_field
        if nested is not None and vector_field:
            check_nested(nested, vector_field, fields)
        t = self._translator = QueryTranslator(
            self._spec,
            exact_fields=exact,
            text_only_fields=text_only_fields(fields, exact),
            highlight_limit_key=self._dialect.highlight_limit_key,
            analysed_chars=analysed,
            highlight_query_fields=self._highlight_query_fields(mapping),
        )
        self._order = OrderedBodies(t, self._dialect.engine_id_order)
        if not field_spec:
            return None
        vectors, self._knn_score = self._dialect.vector_scoring(field_spec)
        self._vector_field = self._spec.search.vector_field
        group = self._spec.fields.group if t.collapse_field else None
        self._hybrid = HybridPlanner(t, self._knn, self._knn_score, group_field=group)
        return vectors

    def _highlight_query_fields(self, mapping: Mapping[str, Any]) -> tuple[str, ...]:
        """Where the passages' text is matched for the highlighter: the content field
        (none named), else, where an index maps it ``index: false``, the store's text
        fields.

        Raises:
            EngineConfigError: the content field is not indexed and the store has no text
                fields to match on.
        """
        content = self._spec.fields.content
        if not (self._spec.search.passages and content and not_indexed(mapping, content)):
            return ()
        names = tuple(tf.name for tf in parse_text_fields(self._spec.search.text_fields))
        if not names:
            raise EngineConfigError(
                "search.passages: the content field is not indexed and search.text_fields"
                " is empty, so the highlighter has no terms; set passages.by: gateway"
            )
        return names

    def _knn(self, request: SearchRequest, size: int, depth: int) -> Body:
        assert self._vector_field is not None
        return knn_body(self._dialect, self._t, self._vector_field, request, size, depth)

    async def search(self, request: SearchRequest) -> list[Hit]:
        """Ranked hits, best first, scores in [0, 1]; text + vector are fused by weighted RRF.

        A hybrid search sends both legs in one ``_msearch``, fused here; deep legs
        return ids only and the fused page is re-read (:mod:`connectors.lucene.hybrid`).

        Raises:
            EngineRejected: a sparse vector (Qdrant only) or neither text nor vector.
            EngineConfigError: the store lacks the fields the request needs.
            EngineUnavailable, EngineTimeout: see :meth:`LuceneClient.read`.
        """
        t = self._t
        if request.sparse is not None:
            raise EngineRejected("sparse vectors are not supported by this engine")
        lexical = request.text is not None
        dense = request.dense is not None
        if dense and self._knn_score is None:
            raise EngineConfigError("search.vector_field: vector search needs a vector field")
        limit = max(0, min(request.limit, MAX_WINDOW))
        if limit == 0:
            return []
        if lexical and dense:
            return await self._hybrid_search(request, limit)
        if lexical:
            response = await self._search(t.lexical(request, limit))
            return normalise_by_max(t.hits(response, with_vectors=request.with_vectors))
        if dense:
            assert self._knn_score is not None
            body = self._knn(request, limit, knn_depth(request, limit))
            return knn_hits(t, await self._search(body), self._knn_score, request.with_vectors)
        raise EngineRejected("a search needs query text or a query vector")

    async def _search(self, body: Body, pit: bool = False) -> Mapping[str, Any]:
        """One retried ``_search`` on the index, or on the PIT the body names (a PIT
        names its indices; the request must not name them again)."""
        return await self._engine.read_call(
            "POST", "/_search" if pit else self._search_path, body=body
        )

    async def _hybrid_search(self, request: SearchRequest, limit: int) -> list[Hit]:
        """One ``_msearch`` of the legs, fused; then the re-read when the plan needs it."""
        assert self._hybrid is not None
        plan = self._hybrid.plan(request, limit)
        payload = ndjson(msearch_lines([leg.body for leg in plan.legs]))

        async def call(seconds: float) -> list[dict[str, Any]]:
            answer = await self._engine.call("POST", self._msearch_path, seconds, body=payload)
            return msearch_responses(answer, len(plan.legs))

        fused = self._hybrid.fuse(plan.legs, await self._engine.read(call), request, limit)
        if not plan.reread or not fused:
            return fused
        body = reread_body(
            self._t,
            fused,
            request.filter,
            with_vectors=request.with_vectors,
            passage_text=request.passage_text,
        )
        anchors = {h.identity: h.anchors for h in fused if h.anchors}
        response = await self._search(body)
        docs = self._t.hits(response, with_vectors=request.with_vectors, anchors=anchors)
        return with_documents(fused, docs)

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        """Hits in (created_at, tie-break) order, newest first when asked, read in pages.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError: see
                :meth:`LuceneClient.read`.
        """
        assert self._order is not None, "the connector is not open"
        engine, dialect = self._engine, self._dialect
        reader = OrderedReader(
            self._order,
            self._t,
            page_size=self._page_size,
            search_page=self._search,
            open_pit=partial(open_pit, engine, dialect, self._pit_path),
            release_pit=partial(release_pit, engine, dialect),
        )
        return await reader.read(request)

    async def fetch(self, flt: Filter, with_vectors: bool = False) -> Hit | None:
        """The first document matching ``flt`` (the newest when created_at is mapped).

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError: see
                :meth:`LuceneClient.read`.
        """
        assert self._order is not None, "the connector is not open"
        response = await self._search(self._order.fetch(flt, with_vectors=with_vectors))
        hits = self._t.hits(response, with_vectors=with_vectors)
        if not hits:
            return None
        hits[0].score = None
        return hits[0]

    # ---- life

    async def ping(self) -> bool:
        """True when the engine answers HTTP (see :meth:`LuceneClient.ping`); never raises."""
        return await self._engine.ping()

    async def close(self) -> None:
        await self._engine.close()

    def for_caller(self, authorization: str) -> Self:
        """A view of this open connector whose engine requests carry the caller's
        ``Authorization`` instead of the store's credential (``scope.forward_credential``):
        the engine's own document-level security then decides what the caller sees.
        It shares the client's connection pool and what open() learned; no I/O.

        Raises:
            EngineUnavailable: the connector is not open.
        """
        view = copy.copy(self)
        view._engine = self._engine.for_caller(authorization)
        return view
