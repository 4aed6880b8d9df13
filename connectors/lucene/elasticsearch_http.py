"""elastic-transport's node over the gateway's HTTP/1.1 client (:mod:`connectors.http1`).

:class:`EngineNode` is an elastic-transport ``BaseAsyncNode`` configured by the node
config as the library's aiohttp node is (its TLS settings, default headers,
compression, timeout, connections per node) and raising the library's error classes,
but each request goes through :class:`connectors.http1.HostPool`, which resends a
request that met a dead reused connection and reads every answer form a client must
take. An answer that is not what the call asked for (a login page, an empty or
undeclared-compressed body, a redirect) is an :class:`UnusableAnswer`, a
``ConnectionError`` holding the :class:`connectors.http_answer.BadResponse` that says
what came back. The transport, its
node pool, sniffing and the client's error classes are the library's own; an error
answer's headers (a 429's ``Retry-After``) reach the client in the response meta. This
module imports elastic-transport: the dialect imports it when it makes a client.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
from typing import Any, ClassVar, NamedTuple

from elastic_transport import (
    ApiResponseMeta,
    BaseAsyncNode,
    ConnectionTimeout,
    HttpHeaders,
    NodeConfig,
    TlsError,
)
from elastic_transport import ConnectionError as TransportConnectionError

from connectors.engine_transport import EngineTransport, TransportFactory
from connectors.http1 import AnswerLimits, BadResponse, HostPool, RequestHead, host_header
from connectors.http_answer import usable
from connectors.tls import client_context


class UnusableAnswer(TransportConnectionError):
    """elastic-transport's connection error for an answer the call cannot use; its
    ``bad_response`` says what came back (the transport replaces ``errors`` on the way)."""

    def __init__(self, bad_response: BadResponse) -> None:
        super().__init__(str(bad_response), errors=(bad_response,))
        self.bad_response = bad_response


class NodeAnswer(NamedTuple):
    """What a node hands its transport: the answer's meta and its raw body."""

    meta: ApiResponseMeta
    body: bytes


def _transport_error(e: Exception) -> Exception:
    """elastic-transport's exception for a failed exchange (``errors`` hold the cause)."""
    if isinstance(e, TimeoutError):
        return ConnectionTimeout("Connection timed out during request", errors=(e,))
    if isinstance(e, ssl.SSLError):
        return TlsError(str(e), errors=(e,))
    if isinstance(e, BadResponse):
        return UnusableAnswer(e)
    return TransportConnectionError(str(e), errors=(e,))


class EngineNode(BaseAsyncNode):
    """An elastic-transport node whose requests go through :mod:`connectors.http1`."""

    limits: ClassVar[AnswerLimits] = AnswerLimits()
    """Bounds on each answer (a store's class sets its own: :func:`node_class`)."""
    transport: TransportFactory | None = None
    """What the node sends through (:mod:`connectors.engine_transport`); None: a
    :class:`HostPool` of real connections."""

    def __init__(self, config: NodeConfig) -> None:
        """Raises:
        ValueError: ``ssl_assert_fingerprint`` (not supported), or a header that would
            break the request's framing.
        """
        super().__init__(config)
        if config.ssl_assert_fingerprint:
            raise ValueError("ssl_assert_fingerprint is not supported")
        tls = config.scheme == "https"
        self._tls = None
        if tls:
            self._tls = client_context(
                config.host,
                context=config.ssl_context,
                verify=config.verify_certs is not False,
                ca_certs=config.ca_certs,
                client_cert=config.client_cert,
                client_key=config.client_key,
                minimum=config.ssl_version,
            )
        self._compress = bool(config.http_compress)
        self._head = RequestHead(host_header(self.host, self.port, tls=tls), dict(self.headers))
        self._pool: EngineTransport | None = None

    async def perform_request(  # type: ignore[override]
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: HttpHeaders | None = None,
        request_timeout: Any = None,
    ) -> NodeAnswer:
        """One request; the answer's meta and raw body, whatever its status.

        ``request_timeout``: seconds, None for none, anything else (the client's
        "default" marker) for the node config's.

        Raises:
            ConnectionTimeout: no answer in time.
            TlsError: the TLS handshake failed.
            ConnectionError: the connection was refused or lost; :class:`UnusableAnswer`
                when the answer is not one the call can use.
        """
        pool = self._pool or self._open_pool()
        seconds = (
            request_timeout
            if request_timeout is None or isinstance(request_timeout, int | float)
            else self.config.request_timeout
        )
        sent = body or None
        extra: dict[str, str] | None = dict(headers.items()) if headers else None
        if sent is not None and self._compress:
            sent = gzip.compress(sent)
            extra = {**(extra or {}), "content-encoding": "gzip"}
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            length = None if sent is None else len(sent)
            head = self._head.build(method, self.path_prefix + target, length, extra)
            answer = usable(
                method,
                await pool.request(
                    head + sent if sent else head,
                    seconds if seconds is not None else 1e9,
                    head_only=method == "HEAD",
                ),
            )
        except (RecursionError, asyncio.CancelledError):
            raise
        except Exception as e:
            raise _transport_error(e) from None
        meta = ApiResponseMeta(
            node=self.config,
            duration=loop.time() - start,
            http_version="1.1",
            status=answer.status,
            headers=HttpHeaders(answer.headers),
        )
        return NodeAnswer(meta, answer.body)

    def _open_pool(self) -> EngineTransport:
        make: TransportFactory = self.transport or _host_pool
        self._pool = make(
            self.host, self.port, self._tls, self.config.connections_per_node, self.limits
        )
        return self._pool

    async def close(self) -> None:  # type: ignore[override]
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


def _host_pool(
    host: str, port: int, tls: ssl.SSLContext | None, limit: int, limits: AnswerLimits
) -> HostPool:
    return HostPool(host, port, tls=tls, limit=limit, limits=limits)


def node_class(
    limits: AnswerLimits | None = None, transport: TransportFactory | None = None
) -> type[EngineNode]:
    """The node class of a store's Elasticsearch client: :class:`EngineNode`, with
    ``limits`` and ``transport`` (:mod:`connectors.engine_transport`) when given."""
    if (limits is None or limits == EngineNode.limits) and transport is None:
        return EngineNode
    # staticmethod: a plain function as a class attribute would be bound to the instance.
    own: dict[str, Any] = {"transport": staticmethod(transport) if transport else None}
    if limits is not None:
        own["limits"] = limits
    return type("EngineNode", (EngineNode,), own)
