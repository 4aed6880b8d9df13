"""The engine I/O seam: one method, a whole request in, its answer out, a deadline given.

Beneath the official clients' node and connection classes
(:mod:`connectors.lucene.elasticsearch_http`, :mod:`connectors.lucene.opensearch_http`)
every request goes through an :class:`EngineTransport`: ``request(data, seconds,
head_only)`` sends the request's bytes (head and body) and returns a
:class:`~connectors.http1.Response`. The real one is :class:`connectors.http1.HostPool`
(sockets, pool, resends); :class:`MockTransport` answers from a handler function, so a
connector's unit test needs no socket (httpx's ``MockTransport`` is the model).

A store is given a transport by a :data:`TransportFactory` (``host, port, tls, limit,
limits`` -> transport): ``LuceneConnector(spec, transport=MockTransport(handler))``.

Errors a transport raises are the ones :meth:`connectors.http1.HostPool.request`
documents (``TimeoutError``, ``ConnectionError`` and its :class:`BadResponse`,
``ssl.SSLError``); a handler raises them to play an engine that fails.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import orjson

from connectors.http1 import Response
from connectors.http_answer import AnswerLimits

__all__ = [
    "EngineRequest",
    "EngineTransport",
    "MockTransport",
    "Response",
    "TransportFactory",
    "json_response",
]


class EngineTransport(Protocol):
    """What a node or connection class sends its requests through."""

    async def request(self, data: bytes, seconds: float, *, head_only: bool = False) -> Response:
        """Send one whole request (head and body) and return its final answer.

        Raises:
            TimeoutError: no answer within ``seconds``.
            ConnectionError: the connection was refused or lost, or the answer is not
                usable HTTP (:class:`connectors.http_answer.BadResponse`).
            ssl.SSLError: the TLS handshake failed.
        """

    async def close(self) -> None:
        """Release the transport's connections (a later request may open new ones)."""


TransportFactory = Callable[[str, int, ssl.SSLContext | None, int, AnswerLimits], EngineTransport]
"""``(host, port, tls, limit, limits)`` -> the transport of one node."""


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """One request as the engine would read it (what a :class:`MockTransport` handler gets)."""

    method: str
    target: str
    """Path and query, as sent (``/idx/_search?size=3``)."""
    headers: Mapping[str, str]
    """Lower-case names."""
    body: bytes = b""
    host: str = ""
    """The node the request was sent to (``host:port``)."""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def json(self) -> object:
        """The body parsed as JSON.

        Raises:
            orjson.JSONDecodeError: the body is not JSON.
        """
        return orjson.loads(self.body)


Handler = Callable[[EngineRequest], Response | Awaitable[Response]]


def json_response(
    value: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """An answer with ``value`` as its JSON body (``content-type: application/json``)."""
    return Response(
        status, {"content-type": "application/json", **(headers or {})}, orjson.dumps(value)
    )


def parse_request(data: bytes, host: str = "") -> EngineRequest:
    """The request a node or connection class sent, read back from its bytes.

    Raises:
        ValueError: ``data`` is not an HTTP/1.1 request head followed by its body.
    """
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("a request head ends with an empty line")
    first, *lines = head.decode("latin-1").split("\r\n")
    method, target, _version = first.split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return EngineRequest(method, target, headers, body, host)


@dataclass(slots=True)
class MockTransport:
    """A transport that answers every request with ``handler(request)`` (sync or async).

    ``requests`` keeps each request in the order sent. As a :data:`TransportFactory`
    (``MockTransport(handler)(host, port, tls, limit, limits)``) it returns itself, so
    every node of a client shares one handler.
    """

    handler: Handler
    requests: list[EngineRequest] = field(default_factory=list)
    closed: bool = False
    node: str = ""
    """The last node a client built its transport for (``host:port``)."""

    def __call__(
        self,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        limit: int,
        limits: AnswerLimits,
    ) -> MockTransport:
        self.node = f"{host}:{port}"
        return self

    async def request(self, data: bytes, seconds: float, *, head_only: bool = False) -> Response:
        """The handler's answer to the request ``data`` holds (no body for HEAD).

        Raises:
            Whatever the handler raises (an engine that fails, as the real transport does).
        """
        request = parse_request(data, self.node)
        self.requests.append(request)
        answer = self.handler(request)
        if not isinstance(answer, Response):
            answer = await answer
        return answer._replace(body=b"") if head_only else answer

    async def close(self) -> None:
        self.closed = True
