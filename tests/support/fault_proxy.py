"""An HTTP/1.1 proxy in front of a real engine that counts every request and injects faults.

Modes, switched by the test at any time:
  pass   relay to the engine
  reset  read the request, then close the connection unanswered (a node that dies)
  hold   keep each request until ``release()``, then relay it (a slow node, slow
         for exactly as long as the test says: no timing in the test)

``requests`` counts every request the proxy read, whatever the mode: a call
the gateway refused without calling the engine leaves it unchanged. Each client
connection gets its own upstream connection; the engine behind it is never
touched.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

Mode = Literal["pass", "reset", "hold"]


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.mode: Mode = "pass"
        self.requests = 0
        self.paths: list[str] = []
        self.held = 0
        self._gate = asyncio.Event()
        self._changed = asyncio.Condition()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        self.release()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def hold(self) -> None:
        self._gate.clear()
        self.mode = "hold"

    def release(self) -> None:
        """Let every held request through; new ones pass too."""
        self.mode = "pass"
        self._gate.set()

    async def wait_held(self, n: int) -> None:
        """Until `n` requests are held (under a deadline, not a sleep)."""
        async with asyncio.timeout(30), self._changed:
            await self._changed.wait_for(lambda: self.held >= n)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await _read_message(reader, request=True)
                if request is None:
                    return
                self.requests += 1
                self.paths.append(request.split(b" ", 2)[1].decode("latin-1"))
                if self.mode == "reset":
                    return
                if self.mode == "hold":
                    await self._held()
                if up is None:
                    up = await asyncio.open_connection(*self._upstream)
                up[1].write(request)
                await up[1].drain()
                head_only = request.startswith(b"HEAD ")
                response = await _read_message(up[0], request=False, head_only=head_only)
                if response is None:
                    return
                writer.write(response)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            for w in (writer, up[1] if up else None):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()
            self._tasks.discard(task)

    async def _held(self) -> None:
        async with self._changed:
            self.held += 1
            self._changed.notify_all()
        try:
            await self._gate.wait()
        finally:
            async with self._changed:
                self.held -= 1
                self._changed.notify_all()


async def _read_message(
    reader: asyncio.StreamReader, *, request: bool, head_only: bool = False
) -> bytes | None:
    """One whole HTTP/1.1 message (head and body, as sent), or None at end of stream."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if head_only:
        return head
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            body += size_line
            size = int(size_line.split(b";")[0], 16)
            body += await reader.readexactly(size + 2)
            if size == 0:
                return head + bytes(body)
    length = int(headers.get(b"content-length", b"0"))
    status_no_body = not request and head.split(b" ", 2)[1] in (b"204", b"304")
    if status_no_body:
        return head
    return head + await reader.readexactly(length)
