"""Driving the gateway's HTTP app in this process: raw ASGI POSTs and a stub connector.

No HTTP client, no socket and no server, so this process's CPU time is the gateway's
own work (bench.tracing_cost, bench.mcp_cost).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from connectors.base import EngineInfo, Filter, Hit, OrderedRequest, SearchRequest


class StubConnector:
    """Answers every search with what `search` gives; ordered reads and fetches find nothing."""

    def __init__(self, search: Callable[[SearchRequest], Awaitable[list[Hit]]]) -> None:
        self._search = search

    async def open(self) -> EngineInfo:
        return EngineInfo(engine="stub", lexical=True)

    async def close(self) -> None:
        return None

    async def ping(self) -> bool:
        return True

    async def search(self, request: SearchRequest) -> list[Hit]:
        return await self._search(request)

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        return []

    async def fetch(self, flt: Filter, with_vectors: bool = False) -> Hit | None:
        return None


async def post(
    app: Any, path: str, body: bytes, headers: Mapping[str, str] | None = None
) -> tuple[int, bytes]:
    """One POST of a JSON `body` to `path`; the answer's status and body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 50000),
        "headers": [
            (b"host", b"127.0.0.1:8080"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((k.encode(), v.encode()) for k, v in (headers or {}).items()),
        ],
    }
    sent = False
    status = 0
    out: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body":
            out.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(out)
