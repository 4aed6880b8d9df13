"""The head limits both guarded uvicorn protocols share (h11_guard, httptools_guard).

A timer is armed when a connection opens and after each response; when it fires
while the connection still waits for a request head, the connection is closed.
Each protocol says, in ``_head_pending``, how its parser tells that it waits.

A head still arriving once it is past ``max_header_bytes`` is refused here, 431
in the same words as the app's refusal of a head that arrived whole
(gateway.transports.edge): the app never sees such a request. The rest of that
head is likely in flight; closing on it would reset the connection, and the
client could lose the 431. So the answer is followed by the end of the stream,
the client's further bytes are discarded unparsed, and the connection closes
when the client ends its side or ``LINGER_S`` after the refusal, whichever is
first.
"""

from __future__ import annotations

import asyncio

import orjson

LINGER_S = 1.0
"""How long a connection refused for its head's size is drained before it closes."""

HEAD_TOO_LARGE_MESSAGE = "request header fields too large"
"""The one refusal of a head over ``http.max_header_bytes``, whichever layer counts it."""

_HEAD_TOO_LARGE_BODY = orjson.dumps({"error": HEAD_TOO_LARGE_MESSAGE})
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/json\r\n"
    b"content-length: " + str(len(_HEAD_TOO_LARGE_BODY)).encode() + b"\r\n"
    b"x-content-type-options: nosniff\r\ncache-control: no-store\r\n"
    b"connection: close\r\n\r\n" + _HEAD_TOO_LARGE_BODY
)


class HeadDeadline:
    """Mixin (before the uvicorn protocol in the bases) arming and firing the head timer."""

    header_timeout_s: float = 10.0
    max_header_bytes: int = 16_384

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _head_timer: asyncio.TimerHandle | None = None
    _refused: bool = False
    """The head was refused: every further byte is discarded until the connection closes."""

    def _head_pending(self) -> bool:
        """Whether the connection is still waiting for a complete request head."""
        raise NotImplementedError

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self._head_pending() and not self.transport.is_closing():
            self.transport.close()

    def _refuse_large_head(self) -> None:
        """Answer 431, end the stream, and close once drained (module docstring): the
        pending head grew past ``max_header_bytes``."""
        self._disarm()
        if self.transport.is_closing():
            return
        self._refused = True
        self.transport.write(_HEAD_TOO_LARGE)
        self.transport.write_eof()
        self._head_timer = self.loop.call_later(LINGER_S, self.transport.close)
