"""scope.forward_credential: a caller's view of the connector sends the caller's credential.

A recording pass-through proxy sits between the connector and the real engine:
the engine answers every request (its security is off in the test nodes, so it
ignores credentials), and the proxy shows which Authorization each request carried.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from connectors.base import OrderedRequest, SearchRequest
from tests.connectors.conftest import Loaded, make_connector, scifact_store

pytestmark = [pytest.mark.integration]


class _Proxy(BaseHTTPRequestHandler):
    upstream = ""
    seen: list[str | None] = []

    def _relay(self) -> None:
        type(self).seen.append(self.headers.get("authorization"))
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in ("host", "authorization", "content-length", "connection")
        }
        request = urllib.request.Request(
            self.upstream + self.path, data=body, method=self.command, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                status, payload, rheaders = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as exc:
            status, payload, rheaders = exc.code, exc.read(), exc.headers
        self.send_response(status)
        for k, v in rheaders.items():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str | None]]]:
    loaded: Loaded = request.getfixturevalue(request.param)
    seen: list[str | None] = []
    handler = type("Proxy", (_Proxy,), {"upstream": loaded.url, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("proxy", "loaded_name"),
    [
        pytest.param("os_loaded", "os_loaded", marks=pytest.mark.opensearch),
        pytest.param("es_loaded", "es_loaded", marks=pytest.mark.elasticsearch),
    ],
    indirect=["proxy"],
)
async def test_caller_view_sends_the_callers_credential(
    proxy: tuple[str, list[str | None]], loaded_name: str, request: pytest.FixtureRequest
) -> None:
    url, seen = proxy
    loaded: Loaded = request.getfixturevalue(loaded_name)
    store = scifact_store(
        loaded,
        connection={"hosts": [url], "bearer_token": "gateway-own-token", "timeout_ms": 30_000},
        search={"mode": "lexical", "text_fields": ["title", "text"], "embedder": {"kind": "none"}},
    )
    conn = make_connector(store)
    await conn.open()
    try:
        seen.clear()
        own = await conn.search(SearchRequest(limit=3, text="cancer"))
        assert own
        assert seen
        assert set(seen) == {"Bearer gateway-own-token"}

        seen.clear()
        view = conn.for_caller("Bearer caller-jwt")
        as_caller = await view.search(SearchRequest(limit=3, text="cancer"))
        assert [h.id for h in as_caller] == [h.id for h in own]
        await view.ordered(OrderedRequest(limit=3))
        assert seen
        assert set(seen) == {"Bearer caller-jwt"}
        await view.close()  # a view never closes the shared client

        seen.clear()
        assert await conn.search(SearchRequest(limit=3, text="cancer"))
        assert set(seen) == {"Bearer gateway-own-token"}
    finally:
        await conn.close()
