"""opensearch-py connections: requests sent by the gateway's HTTP/1.1 client, and a busy
node's ``Retry-After`` kept.

:class:`NodeConnection` is opensearch-py's aiohttp connection in everything it is
configured by (TLS context, basic auth, default headers, compression, timeout) and in
what it raises and logs, but it sends each request through :mod:`connectors.http1`, a
third of the CPU per call (``python -m bench.http_clients``). With SigV4 signing the
library's ``AsyncHttpConnection`` (aiohttp, a signer per request) is used instead.

opensearch-py raises an error answer as a ``TransportError`` of status, message
and body: the headers are gone, so a 429's ``Retry-After`` never reaches the
retry loop. Both connection classes ask for 429 and 503 back as answers (the
``ignore`` argument), then raise the same error the stock class would, with the
header's wait attached as ``retry_after_ms``. The transport, its node pool and every
other status are the library's own. This module imports opensearch-py: the dialect imports
it when it makes a client.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlencode

from opensearchpy import AIOHttpConnection, AsyncHttpConnection
from opensearchpy.exceptions import ConnectionError as ClientConnectionError
from opensearchpy.exceptions import ConnectionTimeout, SSLError

from connectors.http1 import HostPool, RequestHead, host_header
from connectors.lucene.failures import retry_after_ms
from connectors.pooled import ResendOnDeadConnection

HINTED = frozenset({429, 503})
"""The statuses whose Retry-After the retry loop can use."""

_log = logging.getLogger("opensearch")
_trace = logging.getLogger("opensearchpy.trace")


class _KeepsRetryAfter:
    """Mixin over an opensearch-py async connection class."""

    async def perform_request(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the library's signature
        ignore: Collection[int] = (),
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        status, response_headers, raw = await super().perform_request(  # type: ignore[misc]
            method, url, params, body, timeout=timeout, ignore=(*ignore, *HINTED), headers=headers
        )
        if status in HINTED and status not in ignore:
            try:
                self._raise_error(status, raw, response_headers.get("content-type"))  # type: ignore[attr-defined]
            except Exception as exc:
                exc.retry_after_ms = retry_after_ms(response_headers)  # type: ignore[attr-defined]
                raise
        return status, response_headers, raw


class NodeConnection(AIOHttpConnection):
    """opensearch-py's aiohttp connection, its requests sent by :mod:`connectors.http1`."""

    _pool: HostPool | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.ssl_assert_fingerprint:
            raise ValueError("ssl_assert_fingerprint is not supported")
        host = host_header(self.hostname, self.port, tls=self.use_ssl)
        self._head = RequestHead(host, self.headers)

    async def perform_request(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the library's signature
        ignore: Collection[int] = (),
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        pool = self._pool or self._open_pool()
        path = self.url_prefix + url
        target = f"{path}?{urlencode(params)}" if params else path
        sent = body
        if self.http_compress and body:
            sent = self._gzip_compress(body)
            headers = {**(headers or {}), "content-encoding": "gzip"}
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            length = None if sent is None else len(sent)
            head = self._head.build(method, target, length, headers)
            answer = await pool.request(
                head + sent if sent else head,
                self.timeout if timeout is None else timeout,
                head_only=method == "HEAD",
            )
        except (RecursionError, asyncio.CancelledError):
            raise
        except Exception as e:
            self.log_request_fail(method, target, path, body, loop.time() - start, exception=e)
            if isinstance(e, TimeoutError):
                raise ConnectionTimeout("TIMEOUT", str(e), e) from e
            if isinstance(e, ssl.SSLError):
                raise SSLError("N/A", str(e), e) from e
            raise ClientConnectionError("N/A", str(e), e) from e
        raw = answer.body.decode("utf-8", "surrogatepass")
        warning = answer.headers.get("warning")
        if warning:
            self._raise_warnings([warning])
        status = answer.status
        if not (200 <= status < 300) and status not in ignore:
            self.log_request_fail(method, target, path, body, loop.time() - start, status, raw)
            self._raise_error(status, raw, answer.headers.get("content-type"))
        # What log_request_success would write: an INFO line, or a trace with a handler.
        if _log.isEnabledFor(logging.INFO) or (
            _trace.handlers and _trace.isEnabledFor(logging.INFO)
        ):
            self.log_request_success(method, target, path, body, status, raw, loop.time() - start)
        return status, answer.headers, raw

    def _open_pool(self) -> HostPool:
        self._pool = HostPool(
            self.hostname,
            self.port,
            tls=self._ssl_context if self.use_ssl else None,
            limit=self._limit or 10,
        )
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


class RetryAfterNodeConnection(_KeepsRetryAfter, NodeConnection):
    """The connection the gateway's OpenSearch clients use."""


class RetryAfterAsyncHttpConnection(_KeepsRetryAfter, ResendOnDeadConnection, AsyncHttpConnection):
    """The connection of a store that signs with SigV4 (the library calls the signer)."""


def connection_class(*, signing: bool) -> type:
    """The connection class of a store: :class:`RetryAfterNodeConnection`, or with SigV4
    :class:`RetryAfterAsyncHttpConnection`."""
    return RetryAfterAsyncHttpConnection if signing else RetryAfterNodeConnection
