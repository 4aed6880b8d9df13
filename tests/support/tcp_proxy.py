"""A TCP proxy in front of a real engine, which a test can stop, restart or stall.

Stopping it closes the listening socket and every open connection, so a
client sees exactly what it sees when a node dies (connection refused);
``stall`` keeps accepting but forwards nothing, like a node that hangs. The
shared engine behind it is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.stalled = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen (on the same port as before after a stop)."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close the listener and every connection: the engine looks dead."""
        if self._server is not None:
            self._server.close()
        # Closing a transport ends its reader too, so every pipe finishes on its own.
        for w in list(self._writers):
            w.close()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        up_writer: asyncio.StreamWriter | None = None
        try:
            if self.stalled:
                await reader.read()  # hold the connection open, answer nothing
                return
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
            self._writers.add(up_writer)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    self._writers.discard(w)
                    w.close()
            self._tasks.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()
