"""uvicorn's h11 protocol with a header deadline (``server.http.protocol: h11``).

uvicorn bounds neither how long a client may take to send a request's headers
nor how long a fresh connection may sit idle before its first byte: one client
could hold sockets open indefinitely by trickling a header. The guarded
protocol arms a timer when a connection opens and after each response, and
closes the connection unless a complete request head arrives before it fires;
it refuses (431, head_deadline.py) a head still incomplete past
``max_header_bytes``, with h11's own incomplete-event limit set above that
(uvicorn_config.py) as a backstop that never answers first. A head that arrives
whole is measured by the app (gateway.transports.edge). h11 drops chunked
trailers itself. It also sends each response in one write (coalesce.py).
Everything else is uvicorn's. The httptools protocol (httptools_guard.py, the
default) enforces the same limits; uvicorn_config.py picks one.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from gateway.transports.coalesce import CoalescingTransport
from gateway.transports.head_deadline import HeadDeadline


class HeaderDeadlineProtocol(HeadDeadline, H11Protocol):
    """H11Protocol closing a connection whose request head is late or too large."""

    def _head_pending(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(cast(asyncio.Transport, CoalescingTransport(transport, self.loop)))
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # the rest of a refused head (head_deadline.py)
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head is in; the body has its own deadline
        elif len(self.conn.trailing_data[0]) > self.max_header_bytes:
            # Still no complete head: everything h11 holds is that head's beginning.
            self._refuse_large_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()

    def eof_received(self) -> None:
        if not self._refused:  # refused: nothing more to parse; the transport closes
            super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def guarded_h11(header_timeout_s: float, max_header_bytes: int) -> type[Any]:
    """The protocol class uvicorn is given, with this server's limits."""
    return type(
        "GatewayH11Protocol",
        (HeaderDeadlineProtocol,),
        {"header_timeout_s": header_timeout_s, "max_header_bytes": max_header_bytes},
    )
