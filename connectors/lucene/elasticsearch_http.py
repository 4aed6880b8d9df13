"""elastic-transport's node over the gateway's HTTP/1.1 client (:mod:`connectors.http1`).

:func:`node_class` is elastic-transport's aiohttp node in everything it is configured
by (the TLS context from the node config, default headers, compression, timeout) and in
what it raises and logs, but each request goes through :class:`connectors.http1.HostPool`,
which also resends a request that met a dead reused connection. The transport, its
node pool, sniffing and the client's error classes are the library's own; an error
answer's headers (a 429's ``Retry-After``) reach the client in the response meta, as
with the stock node. This module imports elastic-transport: the dialect imports it when it
makes a client.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
from typing import Any

from elastic_transport import (
    AiohttpHttpNode,
    ApiResponseMeta,
    ConnectionTimeout,
    HttpHeaders,
    NodeConfig,
    TlsError,
)
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport._models import DEFAULT
from elastic_transport._node import NodeApiResponse

from connectors.http1 import HostPool, RequestHead, host_header


class EngineNode(AiohttpHttpNode):
    """elastic-transport's aiohttp node, its requests sent by :mod:`connectors.http1`."""

    _pool: HostPool | None = None

    def __init__(self, config: NodeConfig) -> None:
        super().__init__(config)
        if config.ssl_assert_fingerprint:
            raise ValueError("ssl_assert_fingerprint is not supported")
        host = host_header(self.host, self.port, tls=self.scheme == "https")
        self._head = RequestHead(host, dict(self.headers.items()))

    async def perform_request(  # type: ignore[override]
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: HttpHeaders | None = None,
        request_timeout: Any = DEFAULT,
    ) -> NodeApiResponse:
        pool = self._pool or self._open_pool()
        seconds = self.config.request_timeout if request_timeout is DEFAULT else request_timeout
        sent = body or None
        extra: dict[str, str] | None = dict(headers.items()) if headers else None
        if sent is not None and self._http_compress:
            sent = gzip.compress(sent)
            extra = {**(extra or {}), "content-encoding": "gzip"}
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            length = None if sent is None else len(sent)
            head = self._head.build(method, self.path_prefix + target, length, extra)
            answer = await pool.request(
                head + sent if sent else head,
                seconds if seconds is not None else 1e9,
                head_only=method == "HEAD",
            )
        except (RecursionError, asyncio.CancelledError):
            raise
        except Exception as e:
            err: Exception
            if isinstance(e, TimeoutError):
                err = ConnectionTimeout("Connection timed out during request", errors=(e,))
            elif isinstance(e, ssl.SSLError):
                err = TlsError(str(e), errors=(e,))
            else:
                err = TransportConnectionError(str(e), errors=(e,))
            self._log_request(
                method=method, target=target, headers=headers, body=body, exception=err
            )
            raise err from None
        meta = ApiResponseMeta(
            node=self.config,
            duration=loop.time() - start,
            http_version="1.1",
            status=answer.status,
            headers=HttpHeaders(answer.headers),
        )
        self._log_request(
            method=method,
            target=target,
            headers=headers,
            body=body,
            meta=meta,
            response=answer.body,
        )
        return NodeApiResponse(meta, answer.body)

    def _open_pool(self) -> HostPool:
        self._pool = HostPool(
            self.host,
            self.port,
            tls=self._ssl_context if self.scheme == "https" else None,
            limit=self._connections_per_node,
        )
        return self._pool

    async def close(self) -> None:  # type: ignore[override]
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


def node_class() -> type:
    """The node class of the gateway's Elasticsearch clients: :class:`EngineNode`."""
    return EngineNode
