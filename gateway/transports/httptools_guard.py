"""uvicorn's httptools protocol with the same edge limits as the h11 one (h11_guard).

httptools is uvicorn's fast parser, but it bounds neither how long a request's
head may take nor how large it may grow (h11 has ``max_incomplete_event_size``;
llhttp leaves header limits to its embedder). This protocol adds both: a timer
armed when a connection opens and after each request, which closes the
connection unless a complete head arrives first, and a count of the head's
bytes that refuses the request (431, head_deadline.py) past ``max_header_bytes``
while it is still arriving (a head that arrives whole is measured by the app,
gateway.transports.edge). Header fields after the body of a chunked request
(trailers) are dropped: llhttp reports them through the same callback as the
head's fields, and uvicorn would append them to the request's headers, where a
trailer could pose as ``Authorization`` or ``X-Forwarded-For``. h11 ignores
them too. It also sends each response in one write (coalesce.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.transports.coalesce import CoalescingTransport
from gateway.transports.head_deadline import HeadDeadline


class GuardedHttpToolsProtocol(HeadDeadline, HttpToolsProtocol):
    """HttpToolsProtocol with a header deadline, a header size limit and no trailers."""

    _awaiting_head: bool = True
    _head_bytes: int = 0
    _boundaries: int = 0

    def _head_pending(self) -> bool:
        return self._awaiting_head

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        wrapped = cast(asyncio.Transport, CoalescingTransport(transport, self.loop))
        super().connection_made(wrapped)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # the rest of a refused head (head_deadline.py)
        boundaries = self._boundaries
        super().data_received(data)
        if self._awaiting_head and self.parser is not None:
            # A head or a body ended in this chunk: its rest may begin the next head and goes
            # uncounted (an undercount of one read); otherwise all of it is the pending head's.
            changed = self._boundaries != boundaries
            self._head_bytes = 0 if changed else self._head_bytes + len(data)
            if self._head_bytes > self.max_header_bytes:
                self._refuse_large_head()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._awaiting_head:  # a field of the head; after it, a trailer: dropped
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._head_bytes = 0
        self._boundaries += 1
        self._disarm()  # the head is in; the body has its own deadline
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._awaiting_head = True  # the next bytes are the next request's head
        self._boundaries += 1

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._awaiting_head and not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def guarded_httptools(header_timeout_s: float, max_header_bytes: int) -> type[Any]:
    """The protocol class uvicorn is given, with this server's limits."""
    return type(
        "GatewayHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"header_timeout_s": header_timeout_s, "max_header_bytes": max_header_bytes},
    )
