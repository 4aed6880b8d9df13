"""A lean HTTP/1.1 client for one engine node: keep-alive connections on asyncio, httptools.

The engine clients keep their API, transport, retries and error classes; this is only
what sits beneath their connection class (``connectors.lucene.opensearch_http``). It
does what the gateway's engine calls need: one host, a bounded pool of keep-alive
connections, a deadline per request, TLS from the client's own context, and responses
parsed by httptools (the C parser uvicorn serves with), read the way RFC 9112 says a
client must: interim 1xx answers are skipped (never left for the next request), a body
without a length ends with the close, a folded header line is unfolded, the content
codings are undone (:mod:`connectors.http_answer`), and each answer is bounded in its
header, body and decoded bytes.

A request that meets a dead *reused* connection (the peer closed or reset it before
any byte of an answer: a proxy kept the client's side open while the node restarted,
or the close crossed the request), or that a reused connection answers 408 (the
server timed the idle connection out as the request arrived), is sent again at once,
on the next connection or a fresh one, up to :data:`MAX_RESENDS` times; the engine
never saw it. A fresh connection's failure, a timeout and a broken answer raise.

Errors: :class:`TimeoutError` when the deadline passes; :class:`ConnectionError` (an
:class:`OSError`) when a connection is lost or refused, :class:`BadResponse` among
them for an answer that is not usable HTTP (:class:`AnswerTooLarge` past the limits);
:class:`ssl.SSLError` from the TLS handshake.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

import httptools

from connectors.http_answer import AnswerLimits, AnswerTooLarge, BadResponse, Response, decode
from connectors.http_request import RequestHead, host_header

__all__ = [
    "AnswerLimits",
    "AnswerTooLarge",
    "BadResponse",
    "HostPool",
    "RequestHead",
    "Response",
    "host_header",
]

MAX_RESENDS = 64
"""A bound on the resends of one request (each spends one dead pooled connection)."""

IDLE_S = 15.0
"""A connection idle longer is closed, not reused (aiohttp's keep-alive default): a NAT or
load balancer may have dropped it without a word, and a request on it would only time out."""

_NO_BODY = frozenset({204, 304})
DEFAULT_LIMITS = AnswerLimits()


class _Lost(ConnectionError):
    """The connection closed before any byte of the answer (a resend is safe)."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: sends a request, resolves the answer's future."""

    def __init__(self, limits: AnswerLimits) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0
        self._limits = limits
        self._parser = httptools.HttpResponseParser(self)
        # Folded header lines (obs-fold) are joined instead of refused (RFC 9112 §5.2), and
        # a line ended by a bare LF is read as one (§2.2 lets a recipient do so).
        self._parser.set_dangerous_leniencies(
            lenient_headers=True, lenient_optional_cr_before_lf=True
        )
        self._waiter: asyncio.Future[Response] | None = None
        self._answered = False
        self._head_only = False
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._head_bytes = 0
        self._body_bytes = 0
        self._interim = False
        self._head_done = False
        self._finished = False

    # -- the exchange ------------------------------------------------------------------

    async def exchange(self, data: bytes, deadline: float, *, head_only: bool) -> Response:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Response] = loop.create_future()
        self._waiter = waiter
        self.reusable = False
        self._answered = False
        self._head_only = head_only
        self._finished = False
        self._next_message()
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
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    def _next_message(self) -> None:
        self._headers = []
        self._body = []
        self._head_bytes = 0
        self._body_bytes = 0
        self._interim = False
        self._head_done = False

    def _time_out(self) -> None:
        self._fail(TimeoutError("the engine did not answer in time"))
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        """End the exchange with ``exc``; the connection is out of step and is closed."""
        self._finished = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    def _done(self, keep: bool) -> None:
        self._finished = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in self._headers:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        codings = headers.get("content-encoding")
        transfer = headers.get("transfer-encoding")
        if transfer is not None and transfer.lower() != "chunked":
            # Transfer codings other than chunked (the parser's) were applied last: undone first.
            codings = f"{codings or ''},{transfer.lower().replace('chunked', '')}"
        if codings and body:
            try:
                body = decode(codings, body, self._limits.decoded_bytes)
            except BadResponse as exc:
                self._fail(exc)
                return
        self.reusable = keep
        waiter.set_result(Response(self._parser.get_status_code(), headers, body))

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._finished:
            return
        if self._head_done and exc is None and self._ends_with_close():
            self._done(keep=False)  # a body without a length ends with the close
        elif not self._answered:
            self._fail(_Lost("the engine closed the connection"))
        else:
            self._fail(ConnectionResetError("the engine closed the connection mid-answer"))

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._finished:
            self.close()  # bytes nobody asked for: the stream is out of step
            return
        self._answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(BadResponse("the engine switched protocols, which no call asks for"))
        except httptools.HttpParserError:
            self._fail(BadResponse("the engine's answer is not HTTP/1.1"))

    # -- httptools callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._finished:  # a second answer to one request: the stream is out of step
            self._fail(BadResponse("the engine sent more than one answer to a request"))

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._finished:
            return
        self._count_head(len(name) + len(value) + 4)
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._finished:
            return
        status = self._parser.get_status_code()
        if status < 200:
            self._interim = True  # 100 Continue, 103 Early Hints: the answer is still to come
            return
        if self._head_only:
            self._done(keep=False)  # the parser would wait for a HEAD answer's body
            return
        self._head_done = True

    def _ends_with_close(self) -> bool:
        """RFC 9112 §6.3: with no length and no chunked coding last, the body ends with
        the close (read only when the connection closes mid-answer)."""
        if self._parser.get_status_code() in _NO_BODY:
            return False
        length = transfer = b""
        for name, value in self._headers:
            if name.lower() == b"content-length":
                length = value
            elif name.lower() == b"transfer-encoding":
                transfer = value.lower()
        chunked = transfer.rstrip(b" \t").endswith(b"chunked")
        return not chunked and bool(transfer or not length)

    def on_body(self, body: bytes) -> None:
        if self._finished:
            return
        self._body_bytes += len(body)
        if self._body_bytes > self._limits.body_bytes:
            self._fail(AnswerTooLarge("the engine's answer is longer than the store's limit"))
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._finished:
            return
        if self._interim:
            self._next_message()
            return
        self._done(keep=self._parser.should_keep_alive())

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self._limits.header_bytes and not self._finished:
            self._fail(AnswerTooLarge("the engine's answer headers are past the store's limit"))


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
        limits: AnswerLimits = DEFAULT_LIMITS,
    ) -> None:
        """``limit``: connections open at once; ``limits``: bounds on each answer."""
        self._host = host
        self._limits = limits
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

        An interim answer (1xx) is never the result; a 408 is only when a fresh
        connection gave it (on a reused one the request is sent again on a fresh one).

        Raises:
            TimeoutError: no answer within ``seconds``.
            ConnectionError: the connection was refused or lost; :class:`BadResponse`
                when the answer is not usable HTTP (:class:`AnswerTooLarge` past the limits).
            ssl.SSLError: the TLS handshake failed.
        """
        deadline = asyncio.get_running_loop().time() + seconds
        fresh = False
        for _ in range(MAX_RESENDS + 1):
            connection, reused = await self._acquire(deadline, fresh=fresh)
            try:
                answer = await connection.exchange(data, deadline, head_only=head_only)
            except _Lost:
                if not reused:
                    raise
                continue
            finally:
                self._release(connection)
            if answer.status != 408 or not reused:
                return answer
            fresh = True  # the server timed the idle connection out: not the request's fault
        raise ConnectionResetError("every pooled connection to the engine was dead")

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    async def _acquire(self, deadline: float, *, fresh: bool) -> tuple[_Connection, bool]:
        idle = self._idle
        while True:
            if fresh:
                if self._open < self._limit:
                    return await self._connect(deadline), False
                if idle:  # no room for one more: an idle one makes room
                    idle.popleft().close()
                    self._open -= 1
                    continue
                await self._wait_for_room(deadline)
                continue
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
                    lambda: _Connection(self._limits), self._host, self._port, ssl=self._tls
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
