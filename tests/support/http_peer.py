"""One loopback HTTP server standing in for a peer the gateway calls (or a client calls).

A test gives a handler function, ``PeerRequest -> PeerReply``; the server runs it
on a thread per connection and records every request in ``peer.requests``. Used
for the peers that are not ours and whose client we cannot hand a transport: the
embedding service, a Qdrant server answering errors, JWKS endpoints, and the A2M
server the Helm test hook talks to from a subprocess. Real relays in front of
real engines are tests/support/recording_proxy.py and tcp_proxy.py, not this.

A reply with ``hang=True`` holds the connection open until ``peer.release`` is set
(``close`` sets it), then drops it without answering.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HANG_LIMIT_S = 30.0
"""A hanging reply is released by then even if the test never closes the peer."""


@dataclass(frozen=True)
class PeerRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    """Names lower-cased."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass(frozen=True)
class PeerReply:
    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    hang: bool = False

    @classmethod
    def json(
        cls, obj: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> PeerReply:
        sent = {"content-type": "application/json", **(headers or {})}
        return cls(status, json.dumps(obj).encode(), sent)


PeerHandler = Callable[[PeerRequest], PeerReply]


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that refuses the TLS certificate, or drops a hanging reply: expected here.
        return None


class HttpPeer:
    """A threaded HTTP server on 127.0.0.1 and a free port; ``url`` has no trailing slash.

    With ``tls`` (a PEM certificate and its key) it speaks HTTPS only.
    """

    def __init__(self, handler: PeerHandler, tls: tuple[Path, Path] | None = None) -> None:
        self.requests: list[PeerRequest] = []
        self.release = threading.Event()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = PeerRequest(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                peer.requests.append(request)
                reply = handler(request)
                if reply.hang:
                    peer.release.wait(HANG_LIMIT_S)
                    self.close_connection = True
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            # The handshake runs per connection on its handler thread, not in accept().
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
            scheme = "https"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def __enter__(self) -> HttpPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


StartPeer = Callable[[PeerHandler], HttpPeer]
"""The ``http_peer`` fixture (tests/conftest.py): start a peer, closed after the test."""
