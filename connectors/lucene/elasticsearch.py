"""Elasticsearch 8.x/9.x: the Elasticsearch dialect of :mod:`connectors.lucene.connector`.

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

from connectors import json_answer
from connectors.base import Metric, VectorInfo
from connectors.errors import EngineConfigError
from connectors.fusion import clamp01, inner_product_score
from connectors.http_answer import retry_after_ms
from connectors.lucene.dialect import KnnScore, PitCalls, VersionCall
from connectors.lucene.failures import (
    NOT_JSON,
    EngineFailure,
    answer_failure,
    error_causes,
)
from connectors.lucene.order import ES_ENGINE_ID_ORDER
from connectors.lucene.query import Body

if TYPE_CHECKING:
    from elasticsearch import AsyncElasticsearch

    from connectors.engine_transport import TransportFactory
    from connectors.lucene.spec import LuceneSpec

logger = logging.getLogger(__name__)

_SIMILARITY: dict[str, Metric] = {
    "cosine": "cosine",
    "dot_product": "dot",
    "max_inner_product": "dot",
    "l2_norm": "l2",
}
_METRICS: tuple[Metric, ...] = ("cosine", "dot", "l2")

NOT_ELASTICSEARCH = EngineFailure(
    "answer",
    reason="the engine's address answered without Elasticsearch's product header: it is "
    "not an Elasticsearch node, or a proxy in front of it drops the header",
    retryable=False,
)

_JSON = {"accept": "application/json", "content-type": "application/json"}
_NDJSON = {"accept": "application/json", "content-type": "application/x-ndjson"}
_ACCEPT = {"accept": "application/json"}


def _node_version(answer: Mapping[str, Any]) -> str | None:
    versions = [n.get("version") for n in (answer.get("nodes") or {}).values()]
    return str(versions[0]) if versions and versions[0] else None


def answer_serializer(base: type) -> type:
    """elasticsearch-py's orjson serializer ``base``, its answers parsed by
    :func:`connectors.json_answer.loads` (the library wraps its ``ValueError``)."""

    class AnswerSerializer(base):  # type: ignore[misc]
        def json_loads(self, data: bytes) -> Any:
            return json_answer.loads(data)

    return AnswerSerializer


def client_options(
    spec: LuceneSpec, node_class: type | None = None, transport: TransportFactory | None = None
) -> dict[str, Any]:
    """``AsyncElasticsearch`` keyword arguments for ``connection:`` (no I/O); the HTTP
    node class is the gateway's (:mod:`connectors.lucene.elasticsearch_http`, over
    ``transport`` when given) unless given."""
    from elasticsearch.serializer import OrjsonSerializer

    from connectors.lucene.elasticsearch_http import node_class as engine_node_class

    timeout_s = spec.connection.timeout_ms / 1000
    c = spec.connection
    kwargs: dict[str, Any] = {
        "request_timeout": timeout_s,
        "connections_per_node": c.pool_maxsize,
        # The connector retries (only idempotent reads, within the deadline).
        "max_retries": 0,
        "retry_on_timeout": False,
        "verify_certs": c.verify_certs,
        # A timed-out or unreachable node is marked dead either way (1 s, doubling
        # to 30 s), so the connector's next attempt goes to another node.
        "node_class": node_class or engine_node_class(c.answer_limits, transport),
    }
    if c.sniff:
        # Learn the nodes at start, after a failure, and (checked before a request)
        # once sniff_interval_ms has passed, so a restarted node is found again.
        kwargs.update(
            sniff_on_start=True,
            sniff_on_node_failure=True,
            sniff_before_requests=True,
            min_delay_between_sniffing=c.sniff_interval_ms / 1000,
            sniff_timeout=min(timeout_s, 2.0),
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
        logger.warning("TLS certificate verification is off for index %s", spec.index)
    if c.api_key is not None:
        kwargs["api_key"] = c.api_key.get_secret_value()
    elif c.username is not None:
        password = c.password.get_secret_value() if c.password is not None else ""
        kwargs["basic_auth"] = (c.username, password)
    elif c.bearer_token is not None:
        kwargs["bearer_auth"] = c.bearer_token.get_secret_value()
    # orjson instead of stdlib json (and what it refuses: connectors.json_answer); the
    # 8.x client speaks the compatibility media type, so map that one too.
    fast = answer_serializer(OrjsonSerializer)()
    kwargs["serializers"] = {
        "application/json": fast,
        "application/vnd.elasticsearch+json": fast,
    }
    return kwargs


class ElasticsearchDialect:
    """The Elasticsearch side of :class:`connectors.lucene.connector.LuceneConnector`."""

    name = "elasticsearch"
    vector_type = "dense_vector"
    engine_id_order = ES_ENGINE_ID_ORDER
    highlight_limit_key = "max_analyzed_offset"
    nested_knn_since: tuple[int, int] | None = (8, 11)
    pit = PitCalls(
        open_path="/{index}/_pit",
        id_key="id",
        close_path="/_pit",
        close_body=lambda pit_id: {"id": pit_id},
    )
    # Not GET /: without the rest-root module it answers 405, and the client then
    # marks the node dead for a second. Needs `monitor`; no version without it.
    version = VersionCall("/_nodes/_local/_none", {"filter_path": "nodes.*.version"}, _node_version)

    def __init__(
        self, node_class: type | None = None, transport: TransportFactory | None = None
    ) -> None:
        """``node_class``: elastic-transport's HTTP node class, when not the default;
        ``transport``: what the default node class sends through, when not sockets."""
        self._node_class = node_class
        self._transport = transport
        self._timed: dict[float, AsyncElasticsearch] = {}
        self._timed_for: Any = None

    async def request(
        self,
        client: AsyncElasticsearch,
        method: str,
        path: str,
        *,
        seconds: float,
        body: Body | bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Mapping[str, Any]:
        """One call through the client's ``perform_request`` (its error classes and
        product check); ``bytes`` are an NDJSON body."""
        base = _ACCEPT if body is None else _NDJSON if isinstance(body, bytes) else _JSON
        response = await self._timed_client(client, seconds).perform_request(
            method, path, params=params, headers={**base, **headers} if headers else base, body=body
        )
        return response.body  # type: ignore[no-any-return]

    def _timed_client(self, client: AsyncElasticsearch, seconds: float) -> AsyncElasticsearch:
        """The client with a per-request timeout, kept per 0.1 s bucket.

        ``options()`` copies the client (0.1-0.2 ms of CPU, on every search); rounding
        the timeout up to the next 0.1 s keeps the copies few. The store's deadline
        still bounds the call, so the rounding never lets a request run longer.
        """
        if self._timed_for is not client or len(self._timed) > 64:
            self._timed, self._timed_for = {}, client
        key = math.ceil(seconds * 10) / 10
        timed = self._timed.get(key)
        if timed is None:
            timed = self._timed[key] = client.options(request_timeout=key)
        return timed

    async def make_client(self, spec: LuceneSpec) -> AsyncElasticsearch:
        """The async client for ``connection:`` (no I/O).

        Raises:
            EngineConfigError: the settings cannot make a client (the message names the key).
        """
        from elasticsearch import AsyncElasticsearch

        kwargs = client_options(spec, self._node_class, self._transport)
        c = spec.connection
        try:
            return AsyncElasticsearch(**kwargs)
        except (ValueError, TypeError):
            # The client's message can quote the host or the Cloud ID: keep it out.
            key = "connection.cloud_id" if c.cloud_id is not None else "connection.hosts"
            raise EngineConfigError(
                f"{key}: not a valid Elasticsearch address (hosts need a scheme, "
                "host and port, e.g. https://host:9200)"
            ) from None

    async def close_client(self, client: AsyncElasticsearch) -> None:
        await client.close()

    def classify(self, exc: BaseException) -> EngineFailure | None:
        from elastic_transport import ConnectionError as TransportConnectionError
        from elastic_transport import ConnectionTimeout, SerializationError
        from elasticsearch import ApiError, UnsupportedProductError

        if isinstance(exc, ConnectionTimeout):
            return EngineFailure("timeout")
        if isinstance(exc, TransportConnectionError):
            return answer_failure(exc) or EngineFailure("connection")
        if isinstance(exc, SerializationError):
            return NOT_JSON
        if isinstance(exc, UnsupportedProductError):
            # Something answered, but not Elasticsearch: a wrong address, or a proxy.
            return NOT_ELASTICSEARCH
        if isinstance(exc, ApiError):
            return EngineFailure(
                "status",
                status=int(exc.meta.status),
                retry_after_ms=retry_after_ms(dict(exc.meta.headers)),
                causes=error_causes(exc.body),
            )
        return None

    def knn_clause(self, field: str, vector: list[float], k: int, filters: Sequence[Body]) -> Body:
        knn: Body = {"field": field, "query_vector": vector, "k": k, "num_candidates": k}
        if filters:
            # Inside knn the filter restricts the candidates (pre-filtering), so
            # k hits still come back when the filter is selective.
            knn["filter"] = list(filters)
        return {"knn": knn}

    def nested_knn_clause(
        self,
        path: str,
        field: str,
        vector: list[float],
        k: int,
        filters: Sequence[Body],
        inner_hits: Body | None,
    ) -> Body:
        # The knn section takes a nested vector field as it is: hits are diversified
        # over parent documents, and its filter (on parent fields: the scope's) still
        # pre-filters the candidates.
        clause = self.knn_clause(field, vector, k, filters)
        if inner_hits is not None:
            clause["knn"]["inner_hits"] = inner_hits
        return clause

    def vector_scoring(self, spec: Mapping[str, Any]) -> tuple[VectorInfo, KnnScore]:
        """Dimensions and similarity of a ``dense_vector`` mapping, and its score mapping.

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
        dims = spec.get("dims")
        info = VectorInfo(
            dimensions=int(dims) if dims is not None else None, metric=metric, metrics=_METRICS
        )
        return info, inner_product_score if similarity == "max_inner_product" else clamp01
