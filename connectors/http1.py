"""A lean HTTP/1.1 client for one engine node: keep-alive connections on asyncio, httptools.

The engine clients keep their API, transport, retries and error classes; this is only
what sits beneath their connection class (``connectors.lucene.opensearch_http``). It
does what the gateway's engine calls need: one host, a bounded pool of keep-alive
connections, a deadline per request, TLS from the client's own context, and each
answer read the way RFC 9112 says a client must (:mod:`connectors.http_connection`).

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

from connectors.http_answer import AnswerLimits, AnswerTooLarge, BadResponse, Response
from connectors.http_connection import Connection, Lost
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

DEFAULT_LIMITS = AnswerLimits()


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
        self._idle: deque[Connection] = deque()
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
            except Lost:
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

    async def _acquire(self, deadline: float, *, fresh: bool) -> tuple[Connection, bool]:
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

    async def _connect(self, deadline: float) -> Connection:
        loop = asyncio.get_running_loop()
        self._open += 1
        try:
            async with asyncio.timeout_at(deadline):
                _, connection = await loop.create_connection(
                    lambda: Connection(self._limits), self._host, self._port, ssl=self._tls
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

    def _release(self, connection: Connection) -> None:
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
