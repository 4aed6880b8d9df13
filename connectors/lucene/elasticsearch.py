"""Elasticsearch 8.x/9.x connector: the Elasticsearch dialect of :mod:`connectors.lucene.connector`.

What differs from OpenSearch, and lives here:

- kNN is the top-level ``knn`` section (``k``, ``num_candidates``, ``filter``),
  on a ``dense_vector`` field; the same on 8.x and 9.x (the 8.x client talks to
  both, a 9.x client does not talk to 8.x: docs/engines.md).
- ``similarity`` cosine / dot_product / l2_norm give a ``_score`` already in
  [0, 1] ((1 + cos) / 2, (1 + dot) / 2, 1 / (1 + l2²)); max_inner_product is
  unbounded and is mapped back (see :func:`connectors.fusion.inner_product_score`).
- Ordered reads with the engine ``_id`` as record id run in a point in time
  and break ties on ``_shard_doc`` (fielddata on ``_id`` is off in 8.x).
- Readiness is cluster health and the version comes from the local node's
  info, never ``GET /`` (the rest-root module is absent from some distributions).

Needs the ``read`` and ``view_index_metadata`` privileges on the index.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from connectors.base import Metric, SearchRequest, VectorInfo
from connectors.errors import EngineConfigError
from connectors.fusion import clamp01, inner_product_score
from connectors.lucene.client import EngineFailure, error_causes, retry_after_ms
from connectors.lucene.connector import LuceneConnector
from connectors.lucene.order import PIT_KEEP_ALIVE
from connectors.lucene.query import PAGE_SIZE, Body, QueryTranslator
from connectors.pooled import resending

if TYPE_CHECKING:
    from elasticsearch import AsyncElasticsearch

    from connectors.spec import ConnectorSpec

logger = logging.getLogger(__name__)

_SIMILARITY: dict[str, Metric] = {
    "cosine": "cosine",
    "dot_product": "dot",
    "max_inner_product": "dot",
    "l2_norm": "l2",
}
_METRICS: tuple[Metric, ...] = ("cosine", "dot", "l2")


class ElasticsearchConnector(LuceneConnector):
    """An Elasticsearch index (or alias) behind one store."""

    engine_name = "elasticsearch"
    vector_type = "dense_vector"

    def __init__(self, spec: ConnectorSpec, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__(spec, page_size=page_size)
        self._similarity = "cosine"
        self._timed_clients: dict[float, AsyncElasticsearch] = {}
        self._timed_for: Any = None

    @property
    def _es(self) -> AsyncElasticsearch:
        return self._client  # type: ignore[no-any-return]

    def _timed(self, seconds: float) -> AsyncElasticsearch:
        """The client with a per-request timeout, kept per 0.1 s bucket.

        ``options()`` copies the client (0.1-0.2 ms of CPU, on every search); rounding
        the timeout up to the next 0.1 s keeps the copies few. The store's deadline
        still bounds the call, so the rounding never lets a request run longer.
        """
        if self._timed_for is not self._client or len(self._timed_clients) > 64:
            self._timed_clients, self._timed_for = {}, self._client
        key = math.ceil(seconds * 10) / 10
        client = self._timed_clients.get(key)
        if client is None:
            client = self._timed_clients[key] = self._es.options(request_timeout=key)
        return client

    def _client_with_authorization(self, authorization: str) -> AsyncElasticsearch:
        # options() returns a client on the same transport (pool); its headers replace
        # the store's own credential header.
        return self._es.options(headers={"authorization": authorization})

    def _make_client(self) -> AsyncElasticsearch:
        """Build the client from ``connection:`` (no I/O).

        Raises:
            EngineConfigError: the settings cannot make a client (the message names the key).
        """
        from elastic_transport import AiohttpHttpNode
        from elasticsearch import AsyncElasticsearch

        c = self._spec.connection
        kwargs: dict[str, Any] = {
            "request_timeout": self._timeout_s,
            "connections_per_node": c.pool_maxsize,
            # The connector retries (only idempotent reads, within the deadline).
            "max_retries": 0,
            "retry_on_timeout": False,
            "verify_certs": c.verify_certs,
            # A timed-out or unreachable node is marked dead either way (1 s, doubling
            # to 30 s), so the connector's next attempt goes to another node.
            # aiohttp, as by default, resending a request that met a dead pooled connection.
            "node_class": resending(AiohttpHttpNode),
        }
        if c.sniff:
            # Learn the nodes at start, after a failure, and (checked before a request)
            # once sniff_interval_ms has passed, so a restarted node is found again.
            kwargs.update(
                sniff_on_start=True,
                sniff_on_node_failure=True,
                sniff_before_requests=True,
                min_delay_between_sniffing=c.sniff_interval_ms / 1000,
                sniff_timeout=min(self._timeout_s, 2.0),
            )
        if c.cloud_id is not None:
            kwargs["cloud_id"] = c.cloud_id.get_secret_value()
        else:
            kwargs["hosts"] = list(c.hosts)
        if c.ca_certs:
            kwargs["ca_certs"] = c.ca_certs
        if not c.verify_certs:
            # The operator chose this; say so once in our log instead of a warning per client.
            kwargs["ssl_show_warn"] = False
            logger.warning("TLS certificate verification is off for index %s", self._spec.index)
        if c.api_key is not None:
            kwargs["api_key"] = c.api_key.get_secret_value()
        elif c.username is not None:
            password = c.password.get_secret_value() if c.password is not None else ""
            kwargs["basic_auth"] = (c.username, password)
        elif c.bearer_token is not None:
            kwargs["bearer_auth"] = c.bearer_token.get_secret_value()
        from elasticsearch.serializer import OrjsonSerializer

        # orjson instead of stdlib json; the 8.x client speaks the compatibility
        # media type, so map that one too.
        fast = OrjsonSerializer()
        kwargs["serializers"] = {
            "application/json": fast,
            "application/vnd.elasticsearch+json": fast,
        }
        try:
            return AsyncElasticsearch(**kwargs)
        except (ValueError, TypeError):
            # The client's message can quote the host or the Cloud ID: keep it out.
            key = "connection.cloud_id" if c.cloud_id is not None else "connection.hosts"
            raise EngineConfigError(
                f"{key}: not a valid Elasticsearch address (hosts need a scheme, "
                "host and port, e.g. https://host:9200)"
            ) from None

    async def _close_client(self, client: Any) -> None:
        await client.close()

    def _classify(self, exc: BaseException) -> EngineFailure | None:
        from elastic_transport import ConnectionError as TransportConnectionError
        from elastic_transport import ConnectionTimeout
        from elasticsearch import ApiError, UnsupportedProductError

        if isinstance(exc, ConnectionTimeout):
            return EngineFailure("timeout")
        if isinstance(exc, TransportConnectionError):
            return EngineFailure("connection")
        if isinstance(exc, UnsupportedProductError):
            # Something answered, but not Elasticsearch: a wrong address.
            return EngineFailure("status", status=400)
        if isinstance(exc, ApiError):
            return EngineFailure(
                "status",
                status=int(exc.meta.status),
                retry_after_ms=retry_after_ms(dict(exc.meta.headers)),
                causes=error_causes(exc.body),
            )
        return None

    async def _search(self, body: Body, seconds: float, *, pit: bool = False) -> dict[str, Any]:
        client = self._timed(seconds)
        if pit:
            # A PIT names its indices; the request must not name them again.
            response = await client.search(body=body)
        else:
            response = await client.search(index=self._spec.index, body=body)
        return dict(response.body)

    async def _msearch(self, lines: Sequence[Body], seconds: float) -> Mapping[str, Any]:
        response = await self._timed(seconds).msearch(index=self._spec.index, searches=lines)
        return dict(response.body)

    async def _get_mapping(self, seconds: float) -> dict[str, Any]:
        response = await self._es.options(request_timeout=seconds).indices.get_mapping(
            index=self._spec.index
        )
        return dict(response.body)

    async def _health(self, seconds: float) -> None:
        # local: the node answers from its own cluster state, so readiness does not wait
        # on the elected master (an election after the master is lost takes seconds).
        await self._es.options(request_timeout=seconds).cluster.health(local=True)

    async def _version(self, seconds: float) -> str | None:
        from elasticsearch import ApiError

        # Not GET /: without the rest-root module it answers 405, and the client
        # then marks the node dead for a second. Needs `monitor`; None without it.
        try:
            info = await self._es.options(request_timeout=seconds).nodes.info(
                node_id="_local", metric="_none", filter_path="nodes.*.version"
            )
        except ApiError:
            return None
        versions = [n.get("version") for n in info.body.get("nodes", {}).values()]
        return str(versions[0]) if versions and versions[0] else None

    async def _open_pit(self, seconds: float) -> str:
        response = await self._es.options(request_timeout=seconds).open_point_in_time(
            index=self._spec.index, keep_alive=PIT_KEEP_ALIVE
        )
        return str(response.body["id"])

    async def _close_pit(self, pit_id: str, seconds: float) -> None:
        await self._es.options(request_timeout=seconds).close_point_in_time(id=pit_id)

    def _knn_body(
        self, translator: QueryTranslator, request: SearchRequest, size: int, depth: int
    ) -> Body:
        field = self._spec.search.vector_field
        assert field is not None
        assert request.dense is not None
        body = translator.knn_common(request, size)
        # k is the depth too, and `size` cuts: 9.x quantises 384+ dims to bbq_hnsw and
        # rescores oversample x k candidates, so a smaller k ranks a kNN-only search
        # differently (worse) than the same query's hybrid leg.
        knn: Body = {
            "field": field,
            "query_vector": [float(x) for x in request.dense],
            "k": max(depth, size),
            "num_candidates": max(depth, size),
        }
        filters = translator.filter_clauses(request.filter)
        if filters:
            # Inside knn the filter restricts the candidates (pre-filtering), so
            # k hits still come back when the filter is selective.
            knn["filter"] = filters
        body["knn"] = knn
        return body

    def _vector_info(self, spec: Mapping[str, Any]) -> VectorInfo:
        """Dimensions and similarity of a ``dense_vector`` mapping.

        Raises:
            EngineConfigError: the field is not indexed for kNN, or its similarity
                has no A2M metric.
        """
        if spec.get("index") is False:
            raise EngineConfigError(
                "search.vector_field: the dense_vector field has index: false, so kNN "
                "cannot search it"
            )
        # Indexed float vectors default to cosine since 8.0.
        similarity = str(spec.get("similarity", "cosine"))
        metric = _SIMILARITY.get(similarity)
        if metric is None:
            raise EngineConfigError(
                f"search.vector_field: similarity {similarity!r} has no A2M metric "
                "(cosine, dot_product, max_inner_product or l2_norm are supported)"
            )
        self._similarity = similarity
        dims = spec.get("dims")
        return VectorInfo(
            dimensions=int(dims) if dims is not None else None,
            metric=metric,
            metrics=_METRICS,
        )

    def _knn_score(self, raw: float) -> float:
        if self._similarity == "max_inner_product":
            return inner_product_score(raw)
        return clamp01(raw)
