"""uvicorn's h11 protocol with a header deadline, and the uvicorn options built from config.

uvicorn bounds neither how long a client may take to send a request's headers
nor how long a fresh connection may sit idle before its first byte: one client
could hold sockets open indefinitely by trickling a header. The guarded
protocol arms a timer when a connection opens and after each response, and
closes the connection unless a complete request head arrives before it fires.
It also sends each response in one write (coalesce.py). Everything else is
uvicorn's. ``server.http.protocol`` picks it or the httptools one
(httptools_guard.py, the default), which enforces the same limits.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from gateway.config import ServerConfig
from gateway.transports.coalesce import CoalescingTransport
from gateway.transports.head_deadline import HeadDeadline
from gateway.transports.httptools_guard import guarded_httptools


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


def uvicorn_options(server: ServerConfig) -> dict[str, Any]:
    """The uvicorn.Config keywords for ``server``'s HTTP limits and proxy trust."""
    limits = server.http
    deadline_s = limits.header_timeout_ms / 1000
    protocol: type[Any]
    if limits.protocol == "h11":
        protocol = type(
            "GatewayH11Protocol", (HeaderDeadlineProtocol,), {"header_timeout_s": deadline_s}
        )
    else:
        protocol = guarded_httptools(deadline_s, limits.max_header_bytes)
    trusted = list(server.trusted_proxies)
    return {
        "http": protocol,
        "timeout_keep_alive": limits.keep_alive_s,
        "limit_concurrency": limits.max_connections,
        "h11_max_incomplete_event_size": limits.max_header_bytes,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise.
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted or [],
    }
