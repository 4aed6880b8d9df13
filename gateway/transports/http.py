"""HTTP binding (§8.3): one POST endpoint per store, plus discovery and operator endpoints.

URL scheme:
  POST /a2m/{store}                          A2M JSON-RPC for one store
  POST /a2m                                  the default (first configured) store
  GET  /.well-known/a2m-server.json          the default store's describe, plus a `stores` map
  GET  /a2m/{store}/.well-known/a2m-server.json   one store's describe
  GET  /healthz   process alive      GET /readyz   every engine reachable (503 otherwise)
  GET  /metrics   Prometheus text format

With ``server.auth`` on, every POST and both discovery documents need
``Authorization: Bearer``; a missing or bad credential is 401 with
``WWW-Authenticate: Bearer`` before the body is read (§6.1). Operator
endpoints (healthz, readyz, metrics) stay open for probes and scrapers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from gateway import PROTOCOL
from gateway.app import Gateway, UnknownStore
from gateway.auth import AuthenticationError, Authenticator
from gateway.config import ServerConfig
from gateway.errors import ErrorCode, ProtocolNotSupported
from gateway.jsonrpc import error_body, handle_message, to_wire_error
from gateway.metrics import Metrics
from gateway.scopes import Caller

log = logging.getLogger(__name__)
audit = logging.getLogger("a2m.audit")

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


class _A2MApp(FastAPI):
    """FastAPI, with the JSON-RPC POSTs answered before its routing and middleware.

    ``POST /a2m`` and ``POST /a2m/{store}`` are the hot path: they go straight to
    the handler the routes use, skipping FastAPI's per-request telemetry check,
    middleware stack, router and dependency solving (about a third of the
    gateway's own CPU per recall). Everything else, lifespan included, goes
    through FastAPI unchanged.
    """

    rpc_handler: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        handler = self.rpc_handler
        if handler is not None and scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            store: str | None = None
            hit = path == "/a2m"
            if not hit and path.startswith("/a2m/"):
                store = path[5:]
                hit = bool(store) and "/" not in store
            if hit:
                response = await handler(Request(scope, receive), store)
                await response(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    gateway: Gateway,
    server: ServerConfig,
    metrics: Metrics | None = None,
    *,
    strict_start: bool = False,
    authenticator: Authenticator | None = None,
) -> FastAPI:
    """The ASGI app serving every store of `gateway`.

    Raises:
        ConfigError: the JWKS file of server.auth.jwt cannot be read.
    """
    metrics = metrics or Metrics()
    guard = OriginGuard(server.allowed_origins)
    max_body = server.max_body_bytes
    body_timeout_s = server.body_timeout_ms / 1000
    auth = authenticator or Authenticator(server.auth)
    for federation in gateway.federations.values():
        federation.observe_left_out(metrics.observe_left_out)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await gateway.start(strict=strict_start)
        try:
            yield
        finally:
            await gateway.close()

    app = _A2MApp(
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

    async def admit(request: Request) -> Caller | Response:
        """§8.3.1 then §6.1: the Origin, then the credential; a Response refuses the request."""
        if not guard.permits(request.headers.get("origin")):
            return _plain(403, "origin not allowed")
        try:
            principal = await auth.authenticate(request.headers.get("authorization"))
        except AuthenticationError as exc:
            client = request.client.host if request.client else None
            # The reason names what was wrong, never the credential.
            audit.info("auth_failed", extra={"reason": exc.reason, "client": client})
            return _plain(
                401, "authentication required", headers={"WWW-Authenticate": auth.challenge(exc)}
            )
        return Caller(network=True, principal=principal)

    async def rpc(request: Request, store: str | None) -> Response:
        caller = await admit(request)
        if isinstance(caller, Response):
            return caller
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
        try:
            async with asyncio.timeout(body_timeout_s):
                body = await read_body(request)
        except TimeoutError:
            return _plain(408, "request body not received in time")
        if isinstance(body, Response):
            return body

        async def dispatch(method: str, params: Any) -> Any:
            return await dispatcher.dispatch(method, params, caller)

        metrics.inflight.inc()
        try:
            out = await handle_message(body, dispatch)
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

    async def describe_doc(request: Request, store: str | None) -> Response:
        caller = await admit(request)
        if isinstance(caller, Response):
            return caller
        try:
            dispatcher = gateway.dispatcher(store)
        except UnknownStore:
            return _plain(404, "no such store")
        try:
            result: dict[str, Any] = await dispatcher.dispatch("memory/describe", {}, caller)
        except Exception as exc:
            err = to_wire_error(exc)
            status = 429 if err.code is ErrorCode.QUOTA_EXCEEDED else 503
            return Response(error_body(None, err), status_code=status, media_type=JSON)
        if store is None:
            result = {**result, "stores": {n: f"/a2m/{n}" for n in gateway.stores}}
        return Response(orjson.dumps(result), media_type=JSON)

    @app.get("/.well-known/a2m-server.json")
    async def well_known(request: Request) -> Response:
        return await describe_doc(request, None)

    @app.get("/a2m/{store}/.well-known/a2m-server.json")
    async def well_known_store(request: Request, store: str) -> Response:
        return await describe_doc(request, store)

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    @app.get("/readyz")
    async def readyz() -> Response:
        states = await gateway.ready()
        ok = all(states.values())
        body: dict[str, Any] = {"status": "ready" if ok else "not ready", "stores": states}
        if gateway.federations:
            body["federations"] = await gateway.federations_ready()
        return Response(orjson.dumps(body), status_code=200 if ok else 503, media_type=JSON)

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app.rpc_handler = rpc
    return app
