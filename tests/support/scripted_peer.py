"""A loopback HTTP/1.1 server whose every answer is written byte for byte by the test.

``http_peer`` answers through the standard library's server, which decides the framing;
``raw_peer`` hands a test the bare connection. This one sits between: it reads each
request whole (head and ``Content-Length`` body) on real sockets, asks the test's
script for the reply's exact bytes, sends them (in several writes when the reply has
several parts, with a pause between, so interim answers and the final one arrive
apart), then keeps the connection, closes it, resets it or drops it unanswered, as the
script says. Every request and the connection it came on are recorded.
"""

from __future__ import annotations

import gzip
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import orjson

HOLD_LIMIT_S = 30.0
"""A connection is let go by then even if the test never closes the peer."""


@dataclass(frozen=True)
class ScriptedRequest:
    method: str
    target: str
    headers: dict[str, str]
    """Names lower-cased."""
    body: bytes
    connection: int
    """Which accepted connection it came on (0 first)."""
    on_connection: int
    """Its place among that connection's requests (0 first: a fresh connection)."""


@dataclass(frozen=True)
class Reply:
    parts: Sequence[bytes] = ()
    """Written in order, a short pause between two parts."""
    then: Literal["keep", "close", "reset"] = "keep"
    """After the parts: read the next request, close (FIN) or reset (RST)."""
    pause_s: float = 0.02


Script = Callable[[ScriptedRequest], Reply]


def status_line(status: int, reason: str = "OK", version: str = "1.1") -> bytes:
    return f"HTTP/{version} {status} {reason}\r\n".encode()


def interim(status: int, reason: str, *fields: str) -> bytes:
    """An interim (1xx) answer's head: its status line, ``fields`` (``"Name: value"``)."""
    return status_line(status, reason) + "".join(f + "\r\n" for f in fields).encode() + b"\r\n"


def answer(
    status: int,
    body: bytes,
    headers: Sequence[tuple[str, str]] = (),
    *,
    length: bool = True,
    version: str = "1.1",
) -> bytes:
    """A whole answer: status line, ``headers``, a Content-Length unless ``length`` is
    False (then the body ends with the close), and the body."""
    lines = [f"{name}: {value}\r\n" for name, value in headers]
    if length:
        lines.append(f"Content-Length: {len(body)}\r\n")
    return status_line(status, version=version) + "".join(lines).encode() + b"\r\n" + body


def chunked(body: bytes, size: int = 7) -> bytes:
    """``body`` in chunks of ``size`` bytes, with the last-chunk and no trailer."""
    out = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size])
        for i in range(0, len(body), size)
    )
    return out + b"0\r\n\r\n"


def gzip_members(body: bytes, members: int = 2) -> bytes:
    """``body`` as a gzip stream of ``members`` members, concatenated (RFC 1952 §2.2)."""
    cut = max(1, len(body) // members)
    pieces = [body[i : i + cut] for i in range(0, len(body), cut)]
    return b"".join(gzip.compress(p) for p in pieces)


def deflate(body: bytes, *, raw: bool) -> bytes:
    """``body`` deflated: zlib-wrapped (RFC 1950), or raw (RFC 1951) as some servers send."""
    if not raw:
        return zlib.compress(body)
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(body) + packer.flush()


def search_answer(marker: str, extra: dict[str, object] | None = None) -> bytes:
    """A ``_search`` answer whose one hit names ``marker`` (which query it answers)."""
    hit = {"_index": "idx", "_id": marker, "_score": 1.0, "_source": {"body": marker}}
    doc = {"took": 1, "timed_out": False, "hits": {"hits": [hit]}, **(extra or {})}
    return orjson.dumps(doc)


class ScriptedPeer:
    """Serves ``script`` on 127.0.0.1 and a free port; ``url`` has no trailing slash."""

    def __init__(self, script: Script) -> None:
        self._script = script
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.requests: list[ScriptedRequest] = []
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> ScriptedPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                number = self.accepted
                self.accepted += 1
            threading.Thread(target=self._serve, args=(sock, number), daemon=True).start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        sock.settimeout(HOLD_LIMIT_S)
        reader = _Reader(sock)
        try:
            for place in range(10_000):
                request = reader.request(number, place)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                reply = self._script(request)
                for i, part in enumerate(reply.parts):
                    if i:
                        time.sleep(reply.pause_s)
                    sock.sendall(part)
                if reply.then == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if reply.then == "close":
                    sock.shutdown(socket.SHUT_WR)
                    return
        except OSError:
            pass  # the client gave up first: that is some tests' point
        finally:
            sock.close()


@dataclass
class _Reader:
    sock: socket.socket
    buffer: bytes = field(default=b"")

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def request(self, number: int, place: int) -> ScriptedRequest | None:
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                return None
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        line, *fields = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = {}
        for f in fields:
            name, _, value = f.partition(":")
            headers[name.strip().lower()] = value.strip()
        size = int(headers.get("content-length", "0"))
        while len(self.buffer) < size:
            if not self._fill():
                return None
        body, self.buffer = self.buffer[:size], self.buffer[size:]
        return ScriptedRequest(method, target, headers, body, number, place)
