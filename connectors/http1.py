"""A lean HTTP/1.1 client for one engine node: keep-alive connections on asyncio, httptools.

The engine clients keep their API, transport, retries and error classes; this is only
what sits beneath their connection class (``connectors.lucene.opensearch_http``). It
does what the gateway's engine calls need and no more: one host, a bounded pool of
keep-alive connections, a deadline per request, TLS from the client's own context, and
responses parsed by httptools (the C parser uvicorn serves with). Per call it spends
about a third of the CPU of aiohttp under opensearch-py (``python -m bench.http_clients``).

A request that meets a dead *reused* connection (the peer closed or reset it before
any byte of an answer: a proxy kept the client's side open while the node restarted,
or the close crossed the request) is sent again at once on the next connection, up to
:data:`MAX_RESENDS` times; the engine never saw it. A fresh connection's failure, a
timeout and a broken answer raise.

Errors: :class:`TimeoutError` when the deadline passes; :class:`ConnectionError` (an
:class:`OSError`) when a connection is lost or refused, :class:`BadResponse` among
them for an answer that is not HTTP; :class:`ssl.SSLError` from the TLS handshake.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple

import httptools

MAX_RESENDS = 64
"""A bound on the resends of one request (each spends one dead pooled connection)."""

IDLE_S = 15.0
"""A connection idle longer is closed, not reused (aiohttp's keep-alive default): a NAT or
load balancer may have dropped it without a word, and a request on it would only time out."""


class BadResponse(ConnectionError):
    """The engine's bytes are not an HTTP/1.1 response."""


class Response(NamedTuple):
    status: int
    headers: dict[str, str]
    """Lower-case names; a repeated header's values joined by ``, ``."""
    body: bytes


class _Lost(ConnectionError):
    """The connection closed before any byte of the answer (a resend is safe)."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: sends a request, resolves the answer's future."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Response] | None = None
        self._answered = False
        self._head_only = False
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []

    # -- the exchange ------------------------------------------------------------------

    async def exchange(self, data: bytes, deadline: float, *, head_only: bool) -> Response:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Response] = loop.create_future()
        self._waiter = waiter
        self.reusable = False
        self._answered = False
        self._head_only = head_only
        self._headers = []
        self._body = []
        assert self.transport is not None
        self.transport.write(data)
        timer = loop.call_at(deadline, self._time_out)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def alive(self) -> bool:
        """Not closed, nor closing: a peer's close can be read before it is reported lost."""
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _time_out(self) -> None:
        self._fail(TimeoutError("the engine did not answer in time"))
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _done(self, keep: bool) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in self._headers:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        encoding = headers.get("content-encoding")
        if encoding in ("gzip", "deflate") and body:
            try:
                body = zlib.decompress(body, 16 + zlib.MAX_WBITS if encoding == "gzip" else 0)
            except zlib.error:
                waiter.set_exception(BadResponse("the engine's compressed answer is broken"))
                self.close()
                return
        self.reusable = keep
        waiter.set_result(Response(self._parser.get_status_code(), headers, body))

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self._answered:
            self._fail(_Lost("the engine closed the connection"))
        else:
            self._fail(ConnectionResetError("the engine closed the connection mid-answer"))

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the stream is out of step
            self.close()
            return
        self._answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail(BadResponse("the engine's answer is not HTTP/1.1"))
            self.close()

    # -- httptools callbacks -------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._head_only:
            self._done(keep=False)  # the parser would wait for a HEAD answer's body

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._done(keep=self._parser.should_keep_alive())


class HostPool:
    """Keep-alive connections to one ``host:port``, at most ``limit`` open at once."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        limit: int = 10,
        idle_s: float = IDLE_S,
    ) -> None:
        self._host = host
        self._port = port
        self._tls = tls
        self._limit = max(1, limit)
        self._idle_s = idle_s
        self._idle: deque[_Connection] = deque()
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def request(self, data: bytes, seconds: float, *, head_only: bool = False) -> Response:
        """Send ``data`` (a whole request: head and body) and read its answer.

        Raises:
            TimeoutError: no answer within ``seconds``.
            ConnectionError: the connection was refused or lost; :class:`BadResponse`
                when the answer is not HTTP.
            ssl.SSLError: the TLS handshake failed.
        """
        deadline = asyncio.get_running_loop().time() + seconds
        for _ in range(MAX_RESENDS + 1):
            connection, reused = await self._acquire(deadline)
            try:
                return await connection.exchange(data, deadline, head_only=head_only)
            except _Lost:
                if not reused:
                    raise
            finally:
                self._release(connection)
        raise ConnectionResetError("every pooled connection to the engine was dead")

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    async def _acquire(self, deadline: float) -> tuple[_Connection, bool]:
        idle = self._idle
        while True:
            if idle:
                stale = asyncio.get_running_loop().time() - self._idle_s
                while idle and idle[0].idle_since < stale:  # the oldest first
                    idle.popleft().close()
                    self._open -= 1
            while idle:
                connection = idle.pop()  # the latest used is the likeliest alive
                if connection.alive():
                    return connection, True
                connection.close()
                self._open -= 1
            if self._open < self._limit:
                return await self._connect(deadline), False
            await self._wait_for_room(deadline)

    async def _connect(self, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        self._open += 1
        try:
            async with asyncio.timeout_at(deadline):
                _, connection = await loop.create_connection(
                    _Connection, self._host, self._port, ssl=self._tls
                )
        except BaseException:
            self._open -= 1
            self._wake_one()
            raise
        return connection

    async def _wait_for_room(self, deadline: float) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._wake_one()  # woken, then cancelled or late: the room goes to the next
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _release(self, connection: _Connection) -> None:
        if connection.reusable and not connection.closed and not self._closed:
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.append(connection)
        else:
            connection.close()
            self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


def host_header(host: str, port: int, *, tls: bool) -> str:
    """The Host header's value for ``host:port``: IPv6 in brackets, the scheme's port left out."""
    name = f"[{host}]" if ":" in host else host
    return name if port == (443 if tls else 80) else f"{name}:{port}"


class RequestHead:
    """The request heads sent to one node: its fixed lines encoded once, the rest per call."""

    def __init__(self, host: str, headers: Mapping[str, str]) -> None:
        """``host``: the Host header's value; ``headers``: sent with every request.

        Raises:
            ValueError: a header would break the request's framing.
        """
        self._host = host
        self._headers = {name.lower(): value for name, value in headers.items()}
        self._fixed = self._lines(self._headers)

    def build(
        self,
        method: str,
        target: str,
        length: int | None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """The head of one request; ``headers`` add to (or replace) the fixed ones.

        Raises:
            ValueError: the method, target or a header would break the request's framing.
        """
        if _breaks(method) or _breaks(target) or " " in target or " " in method:
            raise ValueError("an engine request line holds a space or a line break")
        fixed = self._fixed
        if headers:
            merged = {**self._headers, **{name.lower(): value for name, value in headers.items()}}
            fixed = self._lines(merged)
        size = b"" if length is None else b"content-length: %d\r\n" % length
        return b"%s %s HTTP/1.1\r\n%s%s\r\n" % (
            method.encode("ascii"),
            target.encode("ascii"),
            fixed,
            size,
        )

    def _lines(self, headers: Mapping[str, str]) -> bytes:
        lines = [f"host: {self._host}\r\n"]
        for name, value in headers.items():
            if _breaks(name) or _breaks(value):
                raise ValueError("an engine request header holds a line break")
            lines.append(f"{name}: {value}\r\n")
        return "".join(lines).encode("latin-1")


def _breaks(text: str) -> bool:
    return "\r" in text or "\n" in text or "\0" in text
