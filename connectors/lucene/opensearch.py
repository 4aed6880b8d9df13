"""OpenSearch 2.x/3.x: the OpenSearch dialect of :mod:`connectors.lucene.connector`.

What differs from Elasticsearch, and lives here:

- kNN is a ``knn`` query inside ``query`` (``vector``, ``k``, ``filter``) on a
  ``knn_vector`` field of the k-NN plugin. OpenSearch has no ``num_candidates``:
  ``k`` is the per-shard candidate depth, and ``size`` cuts the merged list.
- ``space_type`` cosinesimil / innerproduct / l2 (at the field or in ``method``).
  cosinesimil scores ``(2 - d) / 2 = (1 + cos) / 2``, already in [0, 1]; l2
  scores ``1 / (1 + d)``; innerproduct is unbounded and mapped back like
  Elasticsearch's max_inner_product.
- Ordered reads of stores keyed by the engine ``_id`` page by ``from`` inside
  a point in time, sorted on ``_doc`` (see :class:`connectors.lucene.order.OrderPlan`).
- Connections may be signed with AWS SigV4 (Amazon OpenSearch Service or
  Serverless) through opensearch-py's signer and boto3's credential chain;
  boto3 is the optional ``aws`` extra, imported only when configured.

Needs the read permissions on the index plus ``indices:admin/mappings/get``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from connectors import json_answer
from connectors.base import Metric, VectorInfo
from connectors.errors import EngineConfigError
from connectors.fusion import clamp01, inner_product_score
from connectors.http_answer import AnswerText
from connectors.lucene.dialect import KnnScore, PitCalls, VersionCall
from connectors.lucene.failures import NOT_JSON, EngineFailure, answer_failure, error_causes
from connectors.lucene.order import EngineIdOrder
from connectors.lucene.query import Body

if TYPE_CHECKING:
    from connectors.engine_transport import TransportFactory
    from connectors.lucene.spec import LuceneConnectionSpec, LuceneSpec

logger = logging.getLogger(__name__)

_SPACE: dict[str, Metric] = {"cosinesimil": "cosine", "innerproduct": "dot", "l2": "l2"}
_METRICS: tuple[Metric, ...] = ("cosine", "dot", "l2")
_NDJSON = {"content-type": "application/x-ndjson"}


def sniffing(c: LuceneConnectionSpec) -> dict[str, Any]:
    """opensearch-py's sniffing options: learn the nodes at start, after a failure, and
    every ``sniff_interval_ms`` (so a restarted node is found again); none when off."""
    if not c.sniff:
        return {}
    return {
        "sniff_on_start": True,
        "sniff_on_connection_fail": True,
        "sniffer_timeout": c.sniff_interval_ms / 1000,
        "sniff_timeout": min(c.timeout_ms / 1000, 2.0),
    }


def client_options(
    spec: LuceneSpec,
    aws: Any = None,
    connection: type | None = None,
    transport: TransportFactory | None = None,
) -> dict[str, Any]:
    """``AsyncOpenSearch`` keyword arguments for ``connection:`` (no I/O); ``aws`` holds
    the credentials :func:`aws_credentials` found, for aws_sigv4; ``connection`` is the
    HTTP connection class when not the gateway's (:func:`connection_class`, over
    ``transport`` when given).

    Raises:
        EngineConfigError: cloud_id is set, or aws_sigv4 has no credentials.
    """
    from connectors.lucene.opensearch_http import connection_class

    c = spec.connection
    if c.cloud_id is not None:
        raise EngineConfigError("connection.cloud_id applies to Elasticsearch only; use hosts")
    headers: dict[str, str] = {}
    kwargs: dict[str, Any] = {
        "hosts": list(c.hosts),
        "timeout": spec.connection.timeout_ms / 1000,
        "maxsize": c.pool_maxsize,
        # The connector retries (only idempotent reads, within the deadline).
        "max_retries": 0,
        # Not a retry here (max_retries is 0): a timed-out node is marked dead, so the
        # connector's next attempt goes to another node, as after a refused connection.
        "retry_on_timeout": True,
        # A dead node is tried again after 1 s, doubling per failure up to 32 s
        # (opensearch-py's default starts at 60 s; Elasticsearch's client at 1 s).
        "dead_timeout": 1.0,
        "verify_certs": c.verify_certs,
        **sniffing(c),
    }
    if c.ca_certs:
        kwargs["ca_certs"] = c.ca_certs
    if not c.verify_certs:
        # The operator chose this; say so once in our log instead of a warning per client.
        kwargs["ssl_show_warn"] = False
        logger.warning("TLS certificate verification is off for index %s", spec.index)
    if c.api_key is not None:
        headers["authorization"] = f"ApiKey {c.api_key.get_secret_value()}"
    elif c.username is not None:
        password = c.password.get_secret_value() if c.password is not None else ""
        kwargs["http_auth"] = (c.username, password)
    elif c.bearer_token is not None:
        headers["authorization"] = f"Bearer {c.bearer_token.get_secret_value()}"
    elif c.aws_sigv4 is not None:
        kwargs["http_auth"] = _sigv4_auth(aws, c.aws_sigv4.region, c.aws_sigv4.service)
    # The gateway's connection class: its HTTP client, the SigV4 signer called per
    # request, a 429/503's Retry-After kept, the store's bounds on each answer.
    kwargs["connection_class"] = connection or connection_class(c.answer_limits, transport)
    if headers:
        kwargs["headers"] = headers
    # orjson instead of the client's stdlib json for bodies (a 384-float query
    # vector) and responses.
    kwargs["serializer"] = OrjsonSerializer()
    return kwargs


def _root_version(answer: Mapping[str, Any]) -> str | None:
    version = (answer.get("version") or {}).get("number")
    return str(version) if version else None


class OpenSearchDialect:
    """The OpenSearch side of :class:`connectors.lucene.connector.LuceneConnector`."""

    name = "opensearch"
    vector_type = "knn_vector"
    # No _shard_doc in OpenSearch 2.x, and sorting on _id warns on every request.
    engine_id_order = EngineIdOrder("_doc", search_after=False)
    highlight_limit_key = "max_analyzer_offset"
    nested_knn_since: tuple[int, int] | None = None
    pit = PitCalls(
        open_path="/{index}/_search/point_in_time",
        id_key="pit_id",
        close_path="/_search/point_in_time",
        close_body=lambda pit_id: {"pit_id": [pit_id]},
    )
    version = VersionCall("/", {}, _root_version)

    def __init__(
        self, connection_class: type | None = None, transport: TransportFactory | None = None
    ) -> None:
        """``connection_class``: opensearch-py's HTTP connection class, when not the
        default; ``transport``: what the default class sends through, when not sockets."""
        self._connection_class = connection_class
        self._transport = transport
        self._aws: Any = None

    async def request(
        self,
        client: Any,
        method: str,
        path: str,
        *,
        seconds: float,
        body: Body | bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Mapping[str, Any]:
        """One call through the client's transport (its pool, sniffing and error
        classes); ``bytes`` are an NDJSON body. ``headers`` replace the client's
        defaults for this request (opensearch-py has no ``options()``)."""
        if isinstance(body, bytes):
            headers = {**_NDJSON, **headers} if headers else _NDJSON
        answer = await client.transport.perform_request(
            method, path, params=params, body=body, timeout=seconds, headers=headers
        )
        return answer  # type: ignore[no-any-return]

    async def make_client(self, spec: LuceneSpec) -> Any:
        """The async client for ``connection:``; with aws_sigv4, boto3's credential chain
        runs first, off the event loop (it can wait seconds on the metadata service).

        Raises:
            EngineConfigError: the settings cannot make a client, boto3 is missing for
                aws_sigv4, or no AWS credentials are found (the message names the key).
        """
        from opensearchpy import AsyncOpenSearch

        if spec.connection.aws_sigv4 is not None and self._aws is None:
            self._aws = await asyncio.to_thread(aws_credentials)
        kwargs = client_options(spec, self._aws, self._connection_class, self._transport)
        try:
            return AsyncOpenSearch(**kwargs)
        except (ValueError, TypeError):
            # The client's message can quote the host: keep it out.
            raise EngineConfigError(
                "connection.hosts: not a valid OpenSearch address (e.g. https://host:9200)"
            ) from None

    async def close_client(self, client: Any) -> None:
        # opensearch-py closes the live connections only: a node marked dead keeps its
        # aiohttp session open unless it is closed here too.
        pool = client.transport.connection_pool
        dead = [conn for _, conn in getattr(getattr(pool, "dead", None), "queue", ())]
        await client.close()
        for conn in dead:
            await conn.close()

    def classify(self, exc: BaseException) -> EngineFailure | None:
        from opensearchpy.exceptions import ConnectionError as OSConnectionError
        from opensearchpy.exceptions import ConnectionTimeout, SerializationError, TransportError

        # ConnectionTimeout subclasses ConnectionError here: test it first.
        if isinstance(exc, ConnectionTimeout):
            return EngineFailure("timeout")
        if isinstance(exc, OSConnectionError):
            return answer_failure(exc) or EngineFailure("connection")
        if isinstance(exc, SerializationError):
            return NOT_JSON
        if isinstance(exc, TransportError):
            status = exc.status_code
            if not isinstance(status, int):
                # "N/A": no answer at all, e.g. "Unable to sniff hosts." when no node answered.
                return EngineFailure("connection")
            hint = getattr(exc, "retry_after_ms", None)  # connectors.lucene.opensearch_http's
            return EngineFailure(
                "status",
                status=status,
                retry_after_ms=hint if isinstance(hint, int) else None,
                causes=error_causes(exc.info),
            )
        return None

    def knn_clause(self, field: str, vector: list[float], k: int, filters: Sequence[Body]) -> Body:
        knn: Body = {"vector": vector, "k": k}
        if filters:
            # A filter inside the knn query is applied during the graph search
            # (efficient filtering), so k hits still come back when it is selective.
            knn["filter"] = {"bool": {"filter": list(filters)}}
        return {"query": {"knn": {field: knn}}}

    def nested_knn_clause(
        self,
        path: str,
        field: str,
        vector: list[float],
        k: int,
        filters: Sequence[Body],
        inner_hits: Body | None,
    ) -> Body:
        # A parent scores as its best passage. The filters (the scope's) test parent
        # fields: inside the knn query the k-NN plugin pre-filters by the parent
        # documents (k hits still come back under a selective scope); around the nested
        # query they hold whatever the plugin does with them.
        knn: Body = {"vector": vector, "k": k}
        if filters:
            knn["filter"] = {"bool": {"filter": list(filters)}}
        nested: Body = {"path": path, "score_mode": "max", "query": {"knn": {field: knn}}}
        if inner_hits is not None:
            nested["inner_hits"] = inner_hits
        query: Body = {"nested": nested}
        if filters:
            query = {"bool": {"must": [query], "filter": list(filters)}}
        return {"query": query}

    def vector_scoring(self, spec: Mapping[str, Any]) -> tuple[VectorInfo, KnnScore]:
        """Dimension and space type of a ``knn_vector`` mapping, and its score mapping.

        Raises:
            EngineConfigError: the field is model-based (its space lives in a
                trained model) or its space type has no A2M metric.
        """
        if spec.get("model_id"):
            raise EngineConfigError(
                "search.vector_field: knn_vector fields built from a trained model are "
                "not supported (the gateway reads the space type from the mapping)"
            )
        method = spec.get("method") if isinstance(spec.get("method"), Mapping) else {}
        assert isinstance(method, Mapping)
        # The plugin's default space is l2 when neither the field nor its method names one.
        space = str(spec.get("space_type") or method.get("space_type") or "l2")
        metric = _SPACE.get(space)
        if metric is None:
            raise EngineConfigError(
                f"search.vector_field: space_type {space!r} has no A2M metric "
                "(cosinesimil, innerproduct or l2 are supported)"
            )
        dims = spec.get("dimension")
        info = VectorInfo(
            dimensions=int(dims) if dims is not None else None, metric=metric, metrics=_METRICS
        )
        return info, inner_product_score if space == "innerproduct" else clamp01


def aws_credentials() -> Any:
    """boto3's default credential chain. Blocking: it may ask the instance metadata
    service or STS over the network, so callers run it on a worker thread.

    Raises:
        EngineConfigError: boto3 is not installed.
    """
    try:
        import boto3
    except ImportError:
        raise EngineConfigError(
            "connection.aws_sigv4 needs boto3: install the gateway with its 'aws' extra"
        ) from None
    return boto3.Session().get_credentials()


def _sigv4_auth(credentials: Any, region: str, service: str) -> Any:
    """opensearch-py's async SigV4 signer over credentials found by :func:`aws_credentials`.

    Raises:
        EngineConfigError: no credentials were found.
    """
    from opensearchpy import AWSV4SignerAsyncAuth

    if credentials is None:
        raise EngineConfigError(
            "connection.aws_sigv4: no AWS credentials found (environment, profile or role)"
        )
    return AWSV4SignerAsyncAuth(credentials, region, service)


class OrjsonSerializer:
    """opensearch-py's JSON serializer interface, on orjson (also the latency floor's)."""

    mimetype = "application/json"

    def loads(self, s: str | bytes) -> Any:
        try:
            # The bytes of the connection's text when it kept them (never encoded anew).
            return json_answer.loads(s.body if isinstance(s, AnswerText) else s)
        except ValueError as exc:
            from opensearchpy.exceptions import SerializationError

            raise SerializationError(s, exc) from None

    def dumps(self, data: Any) -> Any:
        if isinstance(data, str | bytes):
            return data  # already serialized, as the stock serializer does
        try:
            return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()
        except TypeError as exc:
            from opensearchpy.exceptions import SerializationError

            raise SerializationError(data, exc) from None
