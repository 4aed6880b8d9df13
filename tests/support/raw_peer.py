"""A loopback TCP server that misbehaves on purpose, byte by byte.

``http_peer`` answers well-formed HTTP; this one hands each accepted connection to a
function that may reset it, stall it, cut a body short or break its TLS, the way a
restarting peer or a load balancer in front of one does. ``accepted`` counts the
connections, which is what a test of "one fetch per cooldown" needs.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable

HOLD_LIMIT_S = 30.0
"""A connection held open is let go by then even if the test never closes the peer."""

Behaviour = Callable[["Connection"], None]


class Connection:
    """One accepted connection (TLS-wrapped when the peer serves TLS)."""

    def __init__(self, sock: socket.socket, stop: threading.Event) -> None:
        self.sock = sock
        self.stop = stop

    def read_head(self) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reset(self) -> None:
        """Close with an RST instead of a FIN (SO_LINGER 0)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def hold(self) -> None:
        self.stop.wait(HOLD_LIMIT_S)


def head(status: str, length: int, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


class RawPeer:
    """Serves ``behave`` on 127.0.0.1 and a free port, over TLS when given a context."""

    def __init__(self, behave: Behaviour, tls: ssl.SSLContext | None = None) -> None:
        self._behave = behave
        self._tls = tls
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/jwks.json"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True)
            self._behave(Connection(sock, self._stop))
        except OSError:
            pass  # the client gave up first, or its TLS refused ours: both are the point
        finally:
            sock.close()

    def wait_accepted(self, at_least: int = 1, timeout: float = 10.0) -> int:
        """``accepted`` once it reaches ``at_least`` (a loaded machine accepts late)."""
        deadline = time.monotonic() + timeout
        while self.accepted < at_least and time.monotonic() < deadline:
            self._stop.wait(0.01)
        return self.accepted

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
