"""OpenSearch 2.x/3.x connector: the OpenSearch dialect of :mod:`connectors.lucene.connector`.

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

from connectors.base import Metric, SearchRequest, VectorInfo
from connectors.errors import EngineConfigError
from connectors.fusion import clamp01, inner_product_score
from connectors.lucene.client import EngineFailure, error_causes
from connectors.lucene.connector import LuceneConnector
from connectors.lucene.opensearch_http import connection_class
from connectors.lucene.order import PIT_KEEP_ALIVE, EngineIdOrder
from connectors.lucene.query import PAGE_SIZE, Body, QueryTranslator

if TYPE_CHECKING:
    from connectors.spec import ConnectionSpec, ConnectorSpec

logger = logging.getLogger(__name__)

_SPACE: dict[str, Metric] = {"cosinesimil": "cosine", "innerproduct": "dot", "l2": "l2"}
_METRICS: tuple[Metric, ...] = ("cosine", "dot", "l2")


def sniffing(c: ConnectionSpec) -> dict[str, Any]:
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


class _WithHeaders:
    """An opensearch-py client (or one of its namespaces) that adds headers to every call.

    opensearch-py has no ``options()``; each API method takes ``headers=``, which
    replace the client's defaults (the store's credential) for that request.
    """

    def __init__(self, target: Any, headers: Mapping[str, str]) -> None:
        self._target = target
        self._headers = dict(headers)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return _WithHeaders(attr, self._headers)
        headers = self._headers

        async def call(*args: Any, **kwargs: Any) -> Any:
            kwargs["headers"] = {**(kwargs.get("headers") or {}), **headers}
            return await attr(*args, **kwargs)

        return call


class OpenSearchConnector(LuceneConnector):
    """An OpenSearch index (or alias) behind one store."""

    engine_name = "opensearch"
    vector_type = "knn_vector"
    # No _shard_doc in OpenSearch 2.x, and sorting on _id warns on every request.
    engine_id_order = EngineIdOrder("_doc", search_after=False)

    def __init__(self, spec: ConnectorSpec, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__(spec, page_size=page_size)
        self._space = "l2"
        self._aws_credentials: Any = None

    def _client_with_authorization(self, authorization: str) -> Any:
        return _WithHeaders(self._client, {"authorization": authorization})

    async def _prepare(self) -> None:
        if self._spec.connection.aws_sigv4 is not None and self._aws_credentials is None:
            # Off the event loop: the chain can wait seconds on the metadata service.
            self._aws_credentials = await asyncio.to_thread(aws_credentials)

    def _make_client(self) -> Any:
        """Build the client from ``connection:`` (no I/O).

        Raises:
            EngineConfigError: the settings cannot make a client, boto3 is missing for
                aws_sigv4, or no AWS credentials are found (the message names the key).
        """
        from opensearchpy import AsyncOpenSearch

        c = self._spec.connection
        if c.cloud_id is not None:
            raise EngineConfigError("connection.cloud_id applies to Elasticsearch only; use hosts")
        headers: dict[str, str] = {}
        kwargs: dict[str, Any] = {
            "hosts": list(c.hosts),
            "timeout": self._timeout_s,
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
            logger.warning("TLS certificate verification is off for index %s", self._spec.index)
        if c.api_key is not None:
            headers["authorization"] = f"ApiKey {c.api_key.get_secret_value()}"
        elif c.username is not None:
            password = c.password.get_secret_value() if c.password is not None else ""
            kwargs["http_auth"] = (c.username, password)
        elif c.bearer_token is not None:
            headers["authorization"] = f"Bearer {c.bearer_token.get_secret_value()}"
        elif c.aws_sigv4 is not None:
            kwargs["http_auth"] = _sigv4_auth(
                self._aws_credentials, c.aws_sigv4.region, c.aws_sigv4.service
            )
        # Only the AsyncHttpConnection class calls a signer per request; both keep a
        # 429/503's Retry-After, which the stock classes drop.
        kwargs["connection_class"] = connection_class(signing=c.aws_sigv4 is not None)
        if headers:
            kwargs["headers"] = headers
        # orjson instead of the client's stdlib json for bodies (a 384-float query
        # vector) and responses.
        kwargs["serializer"] = OrjsonSerializer()
        try:
            return AsyncOpenSearch(**kwargs)
        except (ValueError, TypeError):
            # The client's message can quote the host: keep it out.
            raise EngineConfigError(
                "connection.hosts: not a valid OpenSearch address (e.g. https://host:9200)"
            ) from None

    async def _close_client(self, client: Any) -> None:
        # opensearch-py closes the live connections only: a node marked dead keeps its
        # aiohttp session open unless it is closed here too.
        pool = client.transport.connection_pool
        dead = [conn for _, conn in getattr(getattr(pool, "dead", None), "queue", ())]
        await client.close()
        for conn in dead:
            await conn.close()

    def _classify(self, exc: BaseException) -> EngineFailure | None:
        from opensearchpy.exceptions import ConnectionError as OSConnectionError
        from opensearchpy.exceptions import ConnectionTimeout, TransportError

        # ConnectionTimeout subclasses ConnectionError here: test it first.
        if isinstance(exc, ConnectionTimeout):
            return EngineFailure("timeout")
        if isinstance(exc, OSConnectionError):
            return EngineFailure("connection")
        if isinstance(exc, TransportError):
            status = exc.status_code
            if not isinstance(status, int):
                # "N/A": no answer at all, e.g. "Unable to sniff hosts." when no node answered.
                return EngineFailure("connection")
            hint = getattr(exc, "retry_after_ms", None)  # set by connectors.lucene.opensearch_http
            return EngineFailure(
                "status",
                status=status,
                retry_after_ms=hint if isinstance(hint, int) else None,
                causes=error_causes(exc.info),
            )
        return None

    async def _search(self, body: Body, seconds: float, *, pit: bool = False) -> dict[str, Any]:
        if pit:
            # A PIT names its indices; the request must not name them again.
            response = await self._client.search(body=body, request_timeout=seconds)
        else:
            response = await self._client.search(
                index=self._spec.index, body=body, request_timeout=seconds
            )
        return dict(response)

    async def _msearch(self, lines: Sequence[Body], seconds: float) -> Mapping[str, Any]:
        response = await self._client.msearch(
            body=list(lines), index=self._spec.index, request_timeout=seconds
        )
        return dict(response)

    async def _get_mapping(self, seconds: float) -> dict[str, Any]:
        response = await self._client.indices.get_mapping(
            index=self._spec.index, request_timeout=seconds
        )
        return dict(response)

    async def _health(self, seconds: float) -> None:
        # local: the node answers from its own cluster state, so readiness does not wait
        # on the cluster manager (an election after the manager is lost takes seconds).
        await self._client.cluster.health(params={"local": "true"}, request_timeout=seconds)

    async def _version(self, seconds: float) -> str | None:
        info = await self._client.info(request_timeout=seconds)
        version = info.get("version", {}).get("number") if isinstance(info, dict) else None
        return str(version) if version else None

    async def _open_pit(self, seconds: float) -> str:
        response = await self._client.create_pit(
            index=self._spec.index,
            params={"keep_alive": PIT_KEEP_ALIVE},
            request_timeout=seconds,
        )
        return str(response["pit_id"])

    async def _close_pit(self, pit_id: str, seconds: float) -> None:
        await self._client.delete_pit(body={"pit_id": [pit_id]}, request_timeout=seconds)

    def _knn_body(
        self, translator: QueryTranslator, request: SearchRequest, size: int, depth: int
    ) -> Body:
        field = self._spec.search.vector_field
        assert field is not None
        assert request.dense is not None
        body = translator.knn_common(request, size)
        # k is the candidate depth per shard (OpenSearch has no num_candidates);
        # size keeps the best `size` of the merged candidates.
        knn: Body = {"vector": [float(x) for x in request.dense], "k": max(depth, size)}
        filters = translator.filter_clauses(request.filter)
        if filters:
            # A filter inside the knn query is applied during the graph search
            # (efficient filtering), so k hits still come back when it is selective.
            knn["filter"] = {"bool": {"filter": filters}}
        body["query"] = {"knn": {field: knn}}
        return body

    def _vector_info(self, spec: Mapping[str, Any]) -> VectorInfo:
        """Dimension and space type of a ``knn_vector`` mapping.

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
        self._space = space
        dims = spec.get("dimension")
        return VectorInfo(
            dimensions=int(dims) if dims is not None else None,
            metric=metric,
            metrics=_METRICS,
        )

    def _knn_score(self, raw: float) -> float:
        if self._space == "innerproduct":
            return inner_product_score(raw)
        return clamp01(raw)


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
            return orjson.loads(s)
        except orjson.JSONDecodeError as exc:
            from opensearchpy.exceptions import SerializationError

            raise SerializationError(s, exc) from None

    def dumps(self, data: Any) -> Any:
        if isinstance(data, str):
            return data  # already serialized, as the stock serializer does
        try:
            return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()
        except TypeError as exc:
            from opensearchpy.exceptions import SerializationError

            raise SerializationError(data, exc) from None
