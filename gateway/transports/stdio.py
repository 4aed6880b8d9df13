"""stdio binding (§8.2): one JSON value per line in, one per line out; logs on stderr only."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import BinaryIO

from gateway.a2m.dispatcher import Dispatcher
from gateway.a2m.errors import InvalidRequest
from gateway.a2m.jsonrpc import error_body, handle_message

MAX_LINE = 4 * 1024 * 1024


async def _lines(
    read: Callable[[], Awaitable[bytes]], max_line: int
) -> AsyncIterator[bytes | None]:
    """Lines without their newline; None in place of a line over max_line (discarded)."""
    buf = bytearray()
    discarding = False
    while True:
        chunk = await read()
        if not chunk:
            if buf and not discarding:
                yield bytes(buf)
            return
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not discarding:
                    buf += chunk[start:]
                    if len(buf) > max_line:
                        buf.clear()
                        discarding = True
                break
            if discarding:
                discarding = False
                yield None
            else:
                buf += chunk[start:nl]
                if len(buf) > max_line:
                    yield None
                else:
                    yield bytes(buf)
                buf.clear()
            start = nl + 1


async def serve_stdio(
    dispatcher: Dispatcher,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    max_line: int = MAX_LINE,
) -> None:
    """Serve requests from stdin until end-of-file, then return (the caller exits 0).

    Requests are answered in arrival order, one at a time, so responses never
    interleave on stdout.
    """
    in_stream = stdin or sys.stdin.buffer
    out_stream = stdout or sys.stdout.buffer
    loop = asyncio.get_running_loop()
    read: Callable[[], Awaitable[bytes]]
    try:
        reader = asyncio.StreamReader()
        pipe = os.fdopen(os.dup(in_stream.fileno()), "rb")
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)

        async def read() -> bytes:
            return await reader.read(65536)

    except (ValueError, OSError, AttributeError):
        # Not a pipe/socket (a regular file, an in-memory stream): read through a thread.
        async def read() -> bytes:
            return await asyncio.to_thread(
                in_stream.read1 if hasattr(in_stream, "read1") else in_stream.read, 65536
            )

    async for line in _lines(read, max_line):
        if line is None:
            response: bytes | None = error_body(
                None, InvalidRequest(f"Invalid request: line longer than {max_line} bytes")
            )
        elif not line.strip():
            continue
        else:
            response = await handle_message(line, dispatcher.dispatch)
        if response is not None:
            out_stream.write(response + b"\n")
            out_stream.flush()
