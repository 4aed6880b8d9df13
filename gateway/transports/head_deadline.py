"""The header deadline both guarded uvicorn protocols share (h11_guard, httptools_guard).

A timer is armed when a connection opens and after each response; when it fires
while the connection still waits for a request head, the connection is closed.
Each protocol says, in ``_head_pending``, how its parser tells that it waits.
"""

from __future__ import annotations

import asyncio


class HeadDeadline:
    """Mixin (before the uvicorn protocol in the bases) arming and firing the head timer."""

    header_timeout_s: float = 10.0

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _head_timer: asyncio.TimerHandle | None = None

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
