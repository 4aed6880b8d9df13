"""One socket write per response: a transport that gathers the writes of one loop step.

uvicorn writes a response's head and its body as two ``transport.write`` calls,
and asyncio (uvloop too) tries a ``send()`` on each at once: two system calls
per answer, the largest single cost in the gateway's profile. Both writes
happen in the same step of the response task (nothing awaits between them), so
holding the bytes until the loop's next turn sends them as one buffer. Order is
kept, ``close`` sends what is held first, and flow control is the real
transport's (the held bytes never exceed one step's writes).
"""

from __future__ import annotations

import asyncio
from typing import Any


class CoalescingTransport:
    """Wraps an asyncio transport; writes made in one loop step leave as one ``write``."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._held:
            self._loop.call_soon(self._flush)
        self._held.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(b) for b in self._held)

    def __getattr__(self, name: str) -> Any:
        # Everything else (extra info, pause/resume reading, abort, is_closing) is the socket's.
        return getattr(self._transport, name)
