"""HTTP binding (§8.3): one POST endpoint per store, plus discovery and operator endpoints.

URL scheme:
  POST /a2m/{store}                          A2M JSON-RPC for one store
  POST /a2m                                  the default (first configured) store
  GET  /.well-known/a2m-server.json          the default store's describe, plus a `stores` map
  GET  /a2m/{store}/.well-known/a2m-server.json   one store's describe
  GET  /healthz   process alive      GET /readyz   every engine reachable (503 otherwise)
  GET  /metrics   Prometheus text format
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from gateway import PROTOCOL
from gateway.app import Gateway, UnknownStore
from gateway.config import ServerConfig
from gateway.errors import ProtocolNotSupported
from gateway.jsonrpc import error_body, handle_message, to_wire_error
from gateway.metrics import Metrics

log = logging.getLogger(__name__)

JSON = "application/json"
VERSION_HEADER = "a2m-protocol-version"


class OriginGuard:
    """§8.3.1: a request with an Origin not on the allow-list is refused; no Origin is fine."""

    def __init__(self, allowed: list[str]) -> None:
        self._allowed = frozenset(o.rstrip("/").lower() for o in allowed)

    def permits(self, origin: str | None) -> bool:
        return origin is None or origin.rstrip("/").lower() in self._allowed


def _plain(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps({"error": message}), status_code=status, media_type=JSON, headers=headers
    )


def create_app(
    gateway: Gateway,
    server: ServerConfig,
    metrics: Metrics | None = None,
    *,
    strict_start: bool = False,
) -> FastAPI:
    """The ASGI app serving every store of `gateway`."""
    metrics = metrics or Metrics()
    guard = OriginGuard(server.allowed_origins)
    max_body = server.max_body_bytes

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await gateway.start(strict=strict_start)
        try:
            yield
        finally:
            await gateway.close()

    app = FastAPI(
        title="a2m-gateway",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )

    async def read_body(request: Request) -> bytes | Response:
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return _plain(400, "invalid Content-Length")
            if int(length) > max_body:
                return _plain(413, f"body larger than {max_body} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body:
                return _plain(413, f"body larger than {max_body} bytes")
        return bytes(body)

    async def rpc(request: Request, store: str | None) -> Response:
        if not guard.permits(request.headers.get("origin")):
            return _plain(403, "origin not allowed")
        version = request.headers.get(VERSION_HEADER)
        if version is not None and version.strip() != PROTOCOL:
            err = ProtocolNotSupported(
                f"Protocol version header names a version this server does not speak; "
                f"it speaks {PROTOCOL}",
                data={"supported": [PROTOCOL]},
            )
            return Response(error_body(None, err), status_code=400, media_type=JSON)
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != JSON and not ctype.endswith("+json"):
            return _plain(415, "Content-Type must be application/json")
        try:
            dispatcher = gateway.dispatcher(store)
        except UnknownStore:
            return _plain(404, "no such store")
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        metrics.inflight.inc()
        try:
            out = await handle_message(body, dispatcher.dispatch)
        finally:
            metrics.inflight.dec()
        if out is None:
            return Response(status_code=202)
        return Response(out, status_code=200, media_type=JSON)

    @app.post("/a2m/{store}")
    async def rpc_store(request: Request, store: str) -> Response:
        return await rpc(request, store)

    @app.post("/a2m")
    async def rpc_default(request: Request) -> Response:
        return await rpc(request, None)

    async def describe_doc(store: str | None) -> Response:
        try:
            dispatcher = gateway.dispatcher(store)
        except UnknownStore:
            return _plain(404, "no such store")
        try:
            result: dict[str, Any] = await dispatcher.dispatch("memory/describe", {})
        except Exception as exc:
            err = to_wire_error(exc)
            return Response(error_body(None, err), status_code=503, media_type=JSON)
        if store is None:
            result = {**result, "stores": {n: f"/a2m/{n}" for n in gateway.stores}}
        return Response(orjson.dumps(result), media_type=JSON)

    @app.get("/.well-known/a2m-server.json")
    async def well_known(request: Request) -> Response:
        if not guard.permits(request.headers.get("origin")):
            return _plain(403, "origin not allowed")
        return await describe_doc(None)

    @app.get("/a2m/{store}/.well-known/a2m-server.json")
    async def well_known_store(request: Request, store: str) -> Response:
        if not guard.permits(request.headers.get("origin")):
            return _plain(403, "origin not allowed")
        return await describe_doc(store)

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    @app.get("/readyz")
    async def readyz() -> Response:
        states = await gateway.ready()
        ok = all(states.values())
        body = {"status": "ready" if ok else "not ready", "stores": states}
        return Response(orjson.dumps(body), status_code=200 if ok else 503, media_type=JSON)

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return app
