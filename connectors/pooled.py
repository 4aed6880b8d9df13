"""Dead pooled connections never fail a SigV4-signed OpenSearch request: it is sent again.

The Lucene clients send through the gateway's own HTTP client (connectors/http1.py),
which resends a request that met a dead reused connection itself. A store signing its
requests with SigV4 uses opensearch-py's ``AsyncHttpConnection`` instead (it calls the
signer per request), and that one sends through aiohttp, which keeps idle keep-alive
connections in a pool. A connection can die there without aiohttp noticing: a load
balancer or proxy in front of the engine keeps the client's side open while the node
behind it restarts, or the peer's close crosses the next request on the wire. The
request then fails at once (the peer closes or resets the connection) although the
engine never saw it and may be perfectly healthy.

:class:`ResendOnDeadConnection` sits over that connection class: a request that fails
that way on a *reused* pooled connection is sent again at once. aiohttp discards the
failed connection, so each resend takes the next idle connection, and once the idle
ones are spent, a fresh one: a request is never failed by a dead pooled connection, at
most one resend per dead connection. A request that fails on a fresh connection raises
as before, and counts against the engine. Whether a connection was reused is learnt
where aiohttp picks it, its connector's ``connect``: a connection whose protocol the
connector has handed out before is a pooled one. (aiohttp's client tracing says the
same, but a session with a trace config runs every trace signal of every request,
about 0.1 ms of CPU per engine call.)
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from connectors.http1 import MAX_RESENDS


class _Attempt:
    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


_attempt: ContextVar[_Attempt | None] = ContextVar("a2m_pooled_attempt", default=None)


def _watch(session: Any) -> None:
    """Note on each attempt whether the session's connector handed it a pooled connection."""
    connector = session.connector
    if connector is None or getattr(connector, "_a2m_reuse_watched", False):
        return
    handed_out: weakref.WeakSet[Any] = weakref.WeakSet()
    pick = connector.connect

    async def connect(*args: Any, **kwargs: Any) -> Any:
        connection = await pick(*args, **kwargs)
        protocol = connection.protocol
        attempt = _attempt.get()
        if attempt is not None:
            attempt.reused = protocol is not None and protocol in handed_out
        if protocol is not None:
            handed_out.add(protocol)
        return connection

    connector.connect = connect
    connector._a2m_reuse_watched = True


def _causes(exc: BaseException, depth: int = 0) -> Iterator[BaseException]:
    """The exception and what it wraps: the clients keep aiohttp's error in ``errors``
    (elastic-transport), ``info`` (opensearch-py) or the exception chain."""
    if depth > 6:
        return
    yield exc
    inner: list[Any] = list(getattr(exc, "errors", None) or ())
    inner += [getattr(exc, "info", None), exc.__cause__, exc.__context__]
    for e in inner:
        if isinstance(e, BaseException) and e is not exc:
            yield from _causes(e, depth + 1)


def dead_connection(exc: BaseException) -> bool:
    """The peer closed or reset an established connection under the request (not a
    refused or timed-out connect, not a timeout)."""
    import aiohttp

    for e in _causes(exc):
        if isinstance(e, aiohttp.ServerDisconnectedError):
            return True
        if isinstance(e, aiohttp.ClientOSError) and not isinstance(e, aiohttp.ClientConnectorError):
            return True
    return False


class ResendOnDeadConnection:
    """Mixin over an aiohttp-based connection class of an engine client (opensearch-py's)."""

    session: Any

    async def perform_request(self, *args: Any, **kwargs: Any) -> Any:
        for _ in range(MAX_RESENDS):
            if self.session is None:
                # What the client does on its first request (the session is made lazily),
                # done first here, so the connector is watched before any connection exists.
                made = self._create_aiohttp_session()  # type: ignore[attr-defined]
                if inspect.isawaitable(made):  # opensearch-py's is a coroutine, ES's is not
                    await made
            _watch(self.session)
            attempt = _Attempt()
            token = _attempt.set(attempt)
            try:
                return await super().perform_request(*args, **kwargs)  # type: ignore[misc]
            except Exception as exc:
                if not (attempt.reused and dead_connection(exc)):
                    raise
            finally:
                _attempt.reset(token)
        return await super().perform_request(*args, **kwargs)  # type: ignore[misc]
