"""A pass-through HTTP proxy that records every request on its way to a real engine.

The engine answers everything (the proxy only relays), so a test sees the exact
requests a connector sends: method, path, JSON body, the Authorization header and the
W3C ``traceparent``.
The test nodes run without security, so the credential is recorded here and not
passed on.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP = frozenset({"host", "content-length", "connection", "transfer-encoding"})
_NOT_RELAYED = _HOP | {"authorization"}


@dataclass(frozen=True, slots=True)
class Recorded:
    method: str
    path: str
    body: Any
    """The JSON body, or None when the request had none; an NDJSON body (``_msearch``,
    ``_bulk``) as the list of its lines."""
    authorization: str | None = None
    traceparent: str | None = None


def _decode(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:  # NDJSON: one JSON value per line
        return [json.loads(line) for line in data.splitlines() if line.strip()]


class _Relay(BaseHTTPRequestHandler):
    upstream = ""
    seen: list[Recorded] = []
    lock = threading.Lock()

    def _relay(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        data = self.rfile.read(length) if length else None
        with self.lock:
            self.seen.append(
                Recorded(
                    self.command,
                    self.path,
                    _decode(data) if data else None,
                    self.headers.get("authorization"),
                    self.headers.get("traceparent"),
                )
            )
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _NOT_RELAYED}
        request = urllib.request.Request(
            self.upstream + self.path, data=data, method=self.command, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                status, payload, rheaders = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as exc:
            status, payload, rheaders = exc.code, exc.read(), exc.headers
        self.send_response(status)
        for k, v in rheaders.items():
            if k.lower() not in _HOP:
                self.send_header(k, v)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay

    def log_message(self, format: str, *args: object) -> None:
        return None


@contextmanager
def recording_proxy(upstream: str) -> Iterator[tuple[str, list[Recorded]]]:
    """A proxy to ``upstream`` on a free loopback port: (its URL, the list it records into)."""
    seen: list[Recorded] = []
    handler = type("Relay", (_Relay,), {"upstream": upstream.rstrip("/"), "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
