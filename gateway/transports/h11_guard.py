"""uvicorn's h11 protocol with a header deadline (``server.http.protocol: h11``).

uvicorn bounds neither how long a client may take to send a request's headers
nor how long a fresh connection may sit idle before its first byte: one client
could hold sockets open indefinitely by trickling a header. The guarded
protocol arms a timer when a connection opens and after each response, and
closes the connection unless a complete request head arrives before it fires.
It also sends each response in one write (coalesce.py). Everything else is
uvicorn's. The httptools protocol (httptools_guard.py, the default) enforces the
same limits; uvicorn_config.py picks one.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from gateway.transports.coalesce import CoalescingTransport
from gateway.transports.head_deadline import HeadDeadline


class HeaderDeadlineProtocol(HeadDeadline, H11Protocol):
    """H11Protocol that closes a connection whose request head is not in by the deadline."""

    def _head_pending(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(cast(asyncio.Transport, CoalescingTransport(transport, self.loop)))
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head is in; the body has its own deadline

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def guarded_h11(header_timeout_s: float) -> type[Any]:
    """The protocol class uvicorn is given, with this server's header deadline."""
    return type(
        "GatewayH11Protocol", (HeaderDeadlineProtocol,), {"header_timeout_s": header_timeout_s}
    )
