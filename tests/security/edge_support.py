"""A gateway on a real uvicorn socket, and the raw-socket helpers of the HTTP edge tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import uvicorn

from gateway.observability.metrics import Metrics
from gateway.transports.http import create_app
from gateway.transports.uvicorn_config import uvicorn_options
from tests.security.support import (
    MemoryConnector,
    acl_docs,
    build_gateway,
    memory_store_config,
)


class Captured(logging.Handler):
    """The records of one logger, kept for the test to read."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def audit_records() -> Iterator[list[logging.LogRecord]]:
    handler = Captured()
    audit = logging.getLogger("a2m.audit")
    saved = audit.level
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        audit.removeHandler(handler)
        audit.setLevel(saved)


DEADLINE_S = 20.0
"""Outer bound on waiting for the server to act: a hang fails, it is not a speed check."""

PROTOCOLS = ["httptools", "h11"]
"""Both parsers `server.http.protocol` offers: each must hold the edge limits itself."""


@asynccontextmanager
async def served(
    server: dict[str, Any],
    protocol: str = "httptools",
    stores: tuple[str, ...] = ("docs",),
    federations: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[int, Any]]:
    """The gateway (memory stores named `stores`, and `federations`) on a real loopback
    uvicorn socket, built as ``serve`` builds it (create_app, uvicorn_options): (port, the
    ASGI app)."""
    server = {**server, "http": {**server.get("http", {}), "protocol": protocol}}
    gateway = build_gateway(
        server,
        {name: memory_store_config() for name in stores},
        {name: MemoryConnector(acl_docs()) for name in stores},
        federations,
    )
    cfg = gateway.config.server
    app = create_app(gateway, cfg, Metrics(), bind_host="127.0.0.1")
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_config=None, access_log=False, **uvicorn_options(cfg)
    )
    userver = uvicorn.Server(config)
    # Bound and listening before uvicorn runs: connections wait in the backlog, no polling.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    task = asyncio.create_task(userver.serve(sockets=[sock]))
    try:
        yield port, app
    finally:
        userver.should_exit = True
        await task
        sock.close()


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (a reset, the answer of a
    closed socket to bytes the client sent after the close, counts as closed)."""
    data = b""
    async with asyncio.timeout(DEADLINE_S):
        with contextlib.suppress(ConnectionResetError):
            while chunk := await reader.read(65536):
                data += chunk
    return data


async def wait_until(check: Callable[[], bool]) -> None:
    """Until check() holds, for at most DEADLINE_S (the server acts on its own schedule)."""
    for _ in range(int(DEADLINE_S / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the server never got there")


def post_head(length: int, extra: str = "") -> bytes:
    return (
        "POST /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {length}\r\n{extra}\r\n"
    ).encode()


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, Any]:
    """One response with a Content-Length: (its head, its JSON body)."""
    async with asyncio.timeout(DEADLINE_S):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(h[15:]) for h in head.split(b"\r\n") if h.startswith(b"content-length"))
        return head, json.loads(await reader.readexactly(length))
