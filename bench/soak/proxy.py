"""A fault-injecting HTTP/1.1 relay on loopback, one per engine node.

Unlike ``tests/support/tcp_proxy.py`` (bytes only) it reads each request, so a
fault applies per request even on a pooled keep-alive connection: the mode in
force when a request arrives decides what happens to it.

- ``pass``: relay the request and the engine's answer verbatim.
- ``slow``: wait ``delay_s`` first, then relay.
- ``status``: answer ``status`` (429 or 503) itself, with an engine-like JSON
  error body and, when set, a ``Retry-After`` header; the node sees nothing.
- ``drop``: reset the connection (RST) mid-request: every other dropped
  request is reset before any byte of the answer, the rest after half of it.
- ``reset``: read the request, then reset the connection unanswered (a node
  that dies under the call).
- ``hold`` (``hold``/``release``): keep each request until ``release()``, then
  relay it: a node slow for exactly as long as a test says, no timing involved.
- ``down`` (``go_down``/``come_up``): stop listening and reset every
  connection, so the node looks dead (connection refused) without touching it.
- ``cut_upstream``: close the node's side of every relayed connection and keep the
  client's side open, as a load balancer does while the node behind it restarts: the
  next request on each such client connection is reset.

``requests`` counts every request read, whatever the mode: a call the gateway
refused without calling the engine leaves it unchanged. The soak and the
resilience tests share this one relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import orjson

Mode = Literal["pass", "slow", "status", "drop", "reset", "hold"]
HEAD_LIMIT = 1 << 20

_REASONS = {429: "Too Many Requests", 503: "Service Unavailable"}
_ERROR_TYPES = {
    429: "es_rejected_execution_exception",
    503: "no_shard_available_action_exception",
}


@dataclass(frozen=True, slots=True)
class Fault:
    mode: Mode = "pass"
    delay_s: float = 0.0
    status: int = 503
    retry_after: str | None = None
    """The Retry-After header a ``status`` answer carries (seconds), or none."""


PASS = Fault()


class _Reset(Exception):
    """The connection is to be reset, not answered."""


@dataclass(frozen=True, slots=True)
class _Message:
    head: bytes
    body: bytes
    close: bool
    """The peer asked to close the connection after this message."""

    @property
    def raw(self) -> bytes:
        return self.head + self.body


async def _read_message(
    reader: asyncio.StreamReader, *, request: bool, no_body: bool = False
) -> _Message | None:
    """One HTTP/1.1 message, head and body as sent (chunked bodies kept chunked).

    Returns None at a clean end of stream before a message starts.

    Raises:
        asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError: not HTTP.
    """
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    close = headers.get("connection", "").lower() == "close"
    if not request:
        status = int(lines[0].split(" ", 2)[1])
        no_body = no_body or status in (204, 304) or status < 200
    if no_body:
        return _Message(head, b"", close)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            parts.append(size_line)
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                    parts.append(trailer)
                parts.append(b"\r\n")
                break
            parts.append(await reader.readexactly(size + 2))
        return _Message(head, b"".join(parts), close)
    if "content-length" in headers:
        return _Message(head, await reader.readexactly(int(headers["content-length"])), close)
    if request:
        return _Message(head, b"", close)
    return _Message(head, await reader.read(), True)  # body until the engine closes


def _status_answer(fault: Fault) -> bytes:
    code = fault.status
    kind = _ERROR_TYPES.get(code, "exception")
    cause = {"type": kind, "reason": f"injected by the soak's fault proxy ({code})"}
    body = orjson.dumps({"error": {"root_cause": [cause], **cause}, "status": code})
    lines = [
        f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}",
        "content-type: application/json; charset=UTF-8",
        f"content-length: {len(body)}",
    ]
    if fault.retry_after is not None:
        lines.append(f"retry-after: {fault.retry_after}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN: SO_LINGER on, zero seconds."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """A relay from a loopback port to one engine node, with a fault mode set at run time."""

    def __init__(self, upstream_host: str, upstream_port: int, *, name: str = "node") -> None:
        self.name = name
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._upstreams: set[_Upstream] = set()
        self._drops = 0
        self.fault = PASS
        self.port = 0
        self.counts: Counter[str] = Counter()
        """Requests seen, and what became of them: forwarded, slowed, status_429, ..."""
        self.held = 0
        """Requests waiting in ``hold`` mode now."""
        self._gate = asyncio.Event()
        self._changed = asyncio.Condition()

    @property
    def requests(self) -> int:
        """Every request read so far, whatever became of it."""
        return self.counts["seen"]

    def hold(self) -> None:
        """Keep every request from now on until ``release()``."""
        self._gate.clear()
        self.fault = Fault("hold")

    def release(self) -> None:
        """Let every held request through; new ones pass too."""
        self.fault = PASS
        self._gate.set()

    async def wait_held(self, n: int) -> None:
        """Until ``n`` requests are held (under a deadline, not a sleep)."""
        async with asyncio.timeout(30), self._changed:
            await self._changed.wait_for(lambda: self.held >= n)

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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def down(self) -> bool:
        return self._server is None

    async def start(self) -> None:
        """Listen (on the same port as before after ``go_down``)."""
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, limit=HEAD_LIMIT
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def come_up(self) -> None:
        if self._server is None:
            await self.start()

    async def go_down(self) -> None:
        """Stop listening and reset every connection: the node looks dead."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for w in list(self._writers):
            _reset(w)
        for t in list(self._tasks):
            t.cancel()  # a relay waiting on the node ends now, not when the node answers
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    def cut_upstream(self) -> int:
        """Close every connection to the node, leaving the clients' open; how many."""
        cut = [u for u in self._upstreams if u.writer is not None]
        for upstream in cut:
            assert upstream.writer is not None
            upstream.writer.transport.abort()
        return len(cut)

    async def close(self) -> None:
        self.release()
        await self.go_down()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        upstream = _Upstream()
        self._upstreams.add(upstream)
        try:
            while True:
                request = await _read_message(reader, request=True)
                if request is None:
                    break
                self.counts["seen"] += 1
                await self._one(request, writer, upstream)
                if request.close:
                    break
        except (_Reset, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            _reset(writer)
        except ValueError:  # not HTTP: nothing to relay
            _reset(writer)
        finally:
            upstream.close()
            self._upstreams.discard(upstream)
            self._writers.discard(writer)
            writer.close()
            self._tasks.discard(task)

    async def _one(
        self, request: _Message, writer: asyncio.StreamWriter, upstream: _Upstream
    ) -> None:
        """Handle one request, on the client connection's own upstream connection.

        Raises:
            _Reset: the client connection is to be reset (a drop, or the node is gone).
        """
        fault = self.fault
        if fault.mode == "reset":
            self.counts["reset"] += 1
            raise _Reset
        if fault.mode == "hold":
            self.counts["held"] += 1
            await self._held()
        if fault.mode == "status":
            self.counts[f"status_{fault.status}"] += 1
            writer.write(_status_answer(fault))
            await writer.drain()
            return
        if fault.mode == "drop":
            self._drops += 1
            self.counts["dropped"] += 1
            if self._drops % 2 == 1:
                raise _Reset
        if fault.mode == "slow":
            self.counts["slowed"] += 1
            await asyncio.sleep(fault.delay_s)
        if upstream.writer is None or upstream.reader is None:
            try:
                upstream.reader, upstream.writer = await asyncio.open_connection(
                    *self._upstream, limit=HEAD_LIMIT
                )
            except OSError:
                self.counts["upstream_refused"] += 1
                raise _Reset from None
        is_head = request.head.startswith(b"HEAD ")
        try:
            upstream.writer.write(request.raw)
            await upstream.writer.drain()
            answer = await _read_message(upstream.reader, request=False, no_body=is_head)
        except OSError:
            answer = None
        if answer is None:
            self.counts["upstream_closed"] += 1
            raise _Reset
        if fault.mode == "drop":
            writer.write(answer.raw[: len(answer.raw) // 2])
            await writer.drain()
            raise _Reset
        self.counts["forwarded"] += 1
        writer.write(answer.raw)
        await writer.drain()
        if answer.close:
            upstream.close()


class _Upstream:
    """A client connection's connection to the node, opened on its first relayed request."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.transport.abort()
            self.writer.close()
        self.reader = self.writer = None


@contextlib.asynccontextmanager
async def relay_to(url: str) -> AsyncIterator[FaultProxy]:
    """A started proxy in front of the node at ``url`` (``http://host:port``), closed after."""
    parts = urlsplit(url)
    proxy = FaultProxy(parts.hostname or "127.0.0.1", parts.port or 80)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
