"""opensearch-py's connection class over the gateway's HTTP/1.1 client (:mod:`connectors.http1`).

:class:`NodeConnection` is an opensearch-py ``AsyncConnection`` configured by the same
settings as the library's aiohttp one (TLS, basic auth or a per-request signer such as
SigV4, default headers, compression, timeout, pool size), raising the library's error
classes, but sending each request through :class:`connectors.http1.HostPool` (a third of
the CPU per call of aiohttp, ``python -m bench.http_clients``). That pool resends a
request that met a dead reused connection and reads every answer form a client must
take; an answer that is not what the call asked for (a login page, an empty or
undeclared-compressed body, a redirect) is a connection error holding a
:class:`connectors.http_answer.BadResponse` that says what came back.

A 429 or 503 is raised as :class:`BusyError`, which keeps the answer's ``Retry-After``
(the library's errors drop the headers). The transport, its node pool and sniffing are
the library's own. This module imports opensearch-py: the dialect imports it when it
makes a client.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
import ssl
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar
from urllib.parse import urlencode

import orjson
from opensearchpy import AsyncConnection
from opensearchpy.exceptions import (
    HTTP_EXCEPTIONS,
    ConnectionTimeout,
    OpenSearchWarning,
    SSLError,
    TransportError,
)
from opensearchpy.exceptions import ConnectionError as ClientConnectionError

from connectors.engine_transport import EngineTransport, TransportFactory
from connectors.http1 import AnswerLimits, BadResponse, HostPool, RequestHead, Response, host_header
from connectors.http_answer import answer_text, retry_after_ms, usable
from connectors.tls import client_context

HINTED = frozenset({429, 503})
"""The statuses whose Retry-After the retry loop can use."""

_log = logging.getLogger("opensearch")
_trace = logging.getLogger("opensearchpy.trace")

Signer = Callable[..., Mapping[str, str]]


class BusyError(TransportError):
    """opensearch-py's error for a 429 or 503, with the answer's ``Retry-After``."""

    def __init__(self, status: int, error: Any, info: Any, retry_after: int | None) -> None:
        super().__init__(status, error, info)
        self.retry_after_ms = retry_after


def _error_of(status: int, raw: str, headers: Mapping[str, str]) -> TransportError:
    """The library's exception for an error answer: its class by status, the engine's
    error type as ``error`` and its decoded body as ``info`` (as the library raises it)."""
    message: Any = raw
    info: Any = None
    if raw and headers.get("content-type", "").split(";", 1)[0].strip() == "application/json":
        try:
            info = orjson.loads(raw)
        except orjson.JSONDecodeError:
            info = None
        if isinstance(info, dict):
            message = info.get("error", message)
            if isinstance(message, dict) and "type" in message:
                message = message["type"]
    if status in HINTED:
        return BusyError(status, message, info, retry_after_ms(headers))
    error_class: Any = HTTP_EXCEPTIONS.get(status, TransportError)
    return error_class(status, message, info)  # type: ignore[no-any-return]


def _text(answer: Response) -> str:
    """The answer's body as text.

    Raises:
        BadResponse: the body is not UTF-8.
    """
    try:
        # A success keeps its bytes for the JSON serializer; an error's text is read here.
        ok = 200 <= answer.status < 300
        return answer_text(answer.body) if ok else answer.body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadResponse(
            f"the engine answered {answer.status} with a body that is not UTF-8 text"
        ) from None


def _client_error(e: Exception) -> Exception:
    """The library's exception for a failed exchange (``info`` is the cause)."""
    if isinstance(e, TimeoutError):
        return ConnectionTimeout("TIMEOUT", str(e), e)
    if isinstance(e, ssl.SSLError):
        return SSLError("N/A", str(e), e)
    return ClientConnectionError("N/A", str(e), e)


class NodeConnection(AsyncConnection):
    """An opensearch-py connection whose requests go through :mod:`connectors.http1`."""

    limits: ClassVar[AnswerLimits] = AnswerLimits()
    """Bounds on each answer (a store's class sets its own: :func:`connection_class`)."""
    transport: TransportFactory | None = None
    """What the connection sends through (:mod:`connectors.engine_transport`); None: a
    :class:`HostPool` of real connections."""

    def __init__(
        self,
        host: str = "localhost",
        port: int | None = None,
        url_prefix: str = "",
        timeout: Any = 10,
        http_auth: Any = None,
        use_ssl: bool = False,
        verify_certs: bool = True,
        ca_certs: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        ssl_version: Any = None,
        ssl_assert_fingerprint: str | None = None,
        maxsize: int | None = 10,
        ssl_context: ssl.SSLContext | None = None,
        **kwargs: Any,
    ) -> None:
        """The library's connection settings (``ssl_show_warn``, ``loop`` and the like are
        taken and have nothing to do here).

        Raises:
            ValueError: ``ssl_assert_fingerprint`` (not supported), or a header that
                would break the request's framing.
        """
        self.headers: dict[str, str] = {}
        super().__init__(
            host=host, port=port, url_prefix=url_prefix, timeout=timeout, use_ssl=use_ssl, **kwargs
        )
        if ssl_assert_fingerprint:
            raise ValueError("ssl_assert_fingerprint is not supported")
        self._sign: Signer | None = http_auth if callable(http_auth) else None
        if http_auth is not None and self._sign is None:
            user = ":".join(http_auth) if isinstance(http_auth, tuple | list) else str(http_auth)
            self.headers["authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        self._tls = None
        if self.use_ssl:
            self._tls = client_context(
                self.hostname,
                context=ssl_context,
                verify=verify_certs,
                ca_certs=ca_certs,
                client_cert=client_cert,
                client_key=client_key,
                minimum=ssl_version,
            )
        self._maxsize = maxsize or 10
        self._head = RequestHead(
            host_header(self.hostname, self.port, tls=self.use_ssl), self.headers
        )
        self._pool: EngineTransport | None = None

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
        """One request; ``(status, headers, text)`` for a success or an ignored status.

        Raises:
            ConnectionTimeout: no answer in time.
            SSLError: the TLS handshake failed.
            ConnectionError: the connection was refused or lost, or the answer is not one
                the call can use (its ``info`` a :class:`BadResponse` saying what came back).
            TransportError: an error status (the library's class for it; :class:`BusyError`
                for 429 and 503).
        """
        pool = self._pool or self._open_pool()
        path = self.url_prefix + url
        target = f"{path}?{urlencode(params)}" if params else path
        sent = body
        if self.http_compress and body:
            sent = gzip.compress(body)
            headers = {**(headers or {}), "content-encoding": "gzip"}
        if self._sign is not None:
            merged = {**self.headers, **(headers or {})}
            # The signer's keyword call, as the library's signing connection makes it.
            signed = self._sign(method=method, url=self.host + target, body=sent, headers=merged)
            headers = {**(headers or {}), **signed}
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            length = None if sent is None else len(sent)
            head = self._head.build(method, target, length, headers)
            answer = usable(
                method,
                await pool.request(
                    head + sent if sent else head,
                    self.timeout if timeout is None else timeout,
                    head_only=method == "HEAD",
                ),
            )
            raw = _text(answer)
        except (RecursionError, asyncio.CancelledError):
            raise
        except Exception as e:
            self.log_request_fail(method, target, path, body, loop.time() - start, exception=e)
            raise _client_error(e) from e
        warning = answer.headers.get("warning")
        if warning:
            warnings.warn(warning, category=OpenSearchWarning, stacklevel=2)
        status = answer.status
        if not (200 <= status < 300) and status not in ignore:
            self.log_request_fail(method, target, path, body, loop.time() - start, status, raw)
            raise _error_of(status, raw, answer.headers)
        # What log_request_success would write: an INFO line, or a trace with a handler.
        if _log.isEnabledFor(logging.INFO) or (
            _trace.handlers and _trace.isEnabledFor(logging.INFO)
        ):
            self.log_request_success(method, target, path, body, status, raw, loop.time() - start)
        return status, answer.headers, raw

    def _open_pool(self) -> EngineTransport:
        make: TransportFactory = self.transport or _host_pool
        self._pool = make(self.hostname, self.port, self._tls, self._maxsize, self.limits)
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


def _host_pool(
    host: str, port: int, tls: ssl.SSLContext | None, limit: int, limits: AnswerLimits
) -> HostPool:
    return HostPool(host, port, tls=tls, limit=limit, limits=limits)


def connection_class(
    limits: AnswerLimits | None = None, transport: TransportFactory | None = None
) -> type[NodeConnection]:
    """The connection class of a store: :class:`NodeConnection`, with ``limits`` and
    ``transport`` (:mod:`connectors.engine_transport`) when given."""
    if (limits is None or limits == NodeConnection.limits) and transport is None:
        return NodeConnection
    # staticmethod: a plain function as a class attribute would be bound to the instance.
    own: dict[str, Any] = {"transport": staticmethod(transport) if transport else None}
    if limits is not None:
        own["limits"] = limits
    return type("NodeConnection", (NodeConnection,), own)
