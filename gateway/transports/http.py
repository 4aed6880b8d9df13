"""HTTP binding (§8.3): one POST endpoint per store, plus discovery and operator endpoints.

URL scheme:
  POST /a2m/{store}                          A2M JSON-RPC for one store
  POST /a2m                                  the default (first configured) store
  GET  /.well-known/a2m-server.json          the default store's describe, plus a `stores` map
  GET  /a2m/{store}/.well-known/a2m-server.json   one store's describe
  GET  /healthz   process alive      GET /readyz   every engine reachable (503 otherwise)
  GET  /metrics   Prometheus text format
  GET  /          what this server is and where its endpoints and docs are (JSON, or HTML
                  when the Accept header prefers it)
  POST /mcp, /mcp/{store}                    MCP Streamable HTTP (gateway/mcp/, docs/mcp.md)

With ``server.auth`` on, every POST and both discovery documents need
``Authorization: Bearer``; a missing or bad credential is 401 with
``WWW-Authenticate: Bearer`` before the body is read (§6.1). Operator
endpoints (healthz, readyz, metrics) stay open for probes and scrapers.

Before any of that, every request's Host must be one the gateway serves (on a
loopback bind: the loopback names, which defeats DNS rebinding). Failed
authentication is rate limited per client address; a caller's rate limit is
charged before its body is read, and the bodies buffered at once are bounded.
Nothing is ever redirected; every response says ``nosniff`` and ``no-store``.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from gateway.config import ServerConfig, is_loopback
from gateway.errors import ErrorCode, ProtocolNotSupported, QuotaExceeded
from gateway.jsonrpc import error_body, handle_message, to_wire_error
from gateway.metrics import Metrics
from gateway.ratelimit import RateLimiter
from gateway.scopes import Caller
from gateway.transports.index_page import as_html, index_page, prefers_html

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


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store")]


class HostGuard:
    """The Host header must name this gateway: an exact name, or ``*.domain`` for subdomains.

    With no names configured, a loopback bind serves the loopback names only (a
    DNS-rebinding page reaches the socket under its own name and is refused);
    any other bind serves any Host (the names it is reached by are not known).
    """

    def __init__(self, allowed: list[str], bind_host: str) -> None:
        names = [h.strip().lower().rstrip(".") for h in allowed]
        if not names and is_loopback(bind_host):
            names = list(LOOPBACK_HOSTS)
        self._exact = frozenset(n for n in names if not n.startswith("*."))
        self._suffixes = tuple(n[1:] for n in names if n.startswith("*."))
        self.enabled = bool(names)

    def permits(self, host_header: str | None) -> bool:
        if not self.enabled:
            return True
        if not host_header:
            return False
        host = host_header.strip().lower()
        if host.startswith("["):  # [::1]:8080
            host = host[1 : host.find("]")] if "]" in host else ""
        elif host.count(":") == 1:
            host = host.split(":", 1)[0]
        host = host.rstrip(".")
        return host in self._exact or any(host.endswith(s) for s in self._suffixes)


class BodyBudget:
    """Request-body bytes buffered at once, over all requests: a stall cannot grow memory."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self._limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n


def _header_values(request: Request, name: bytes) -> list[bytes]:
    return [v for k, v in request.scope["headers"] if k == name]


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
    host_guard: HostGuard | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return

        plain_send = send

        async def send_secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await plain_send(message)

        guard = self.host_guard
        if guard is not None and guard.enabled:
            hosts = [v for k, v in scope["headers"] if k == b"host"]
            host = hosts[0].decode("latin-1") if len(hosts) == 1 else None
            if not guard.permits(host):
                await _plain(421, "unknown host")(scope, receive, send_secured)
                return
        send = send_secured
        handler = self.rpc_handler
        if handler is not None and scope["method"] == "POST":
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
    bind_host: str | None = None,
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
    failures = server.auth.failures
    failed_auth = RateLimiter(failures.per_second, failures.burst, failures.max_clients)
    budget = BodyBudget(server.http.max_inflight_body_bytes)
    mcp = _mcp_app(gateway, server, auth, guard)
    for federation in gateway.federations.values():
        federation.observe_left_out(metrics.observe_left_out)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await gateway.start(strict=strict_start)
        try:
            async with mcp.run() if mcp is not None else contextlib.nullcontext():
                yield
        finally:
            await gateway.close()

    app = _A2MApp(
        title="a2m-gateway",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
        # A redirect would send a POST (and its credential) to whatever Host said.
        redirect_slashes=False,
    )
    app.host_guard = HostGuard(server.allowed_hosts, bind_host or server.host)
    app.state.body_budget = budget

    async def read_body(request: Request) -> bytes | Response:
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return _plain(400, "invalid Content-Length")
            if int(length) > max_body:
                return _plain(413, f"body larger than {max_body} bytes")
        body = bytearray()
        try:
            async for chunk in request.stream():
                if not budget.take(len(chunk)):
                    return _plain(503, "server busy", headers={"Retry-After": "1"})
                body += chunk
                if len(body) > max_body:
                    return _plain(413, f"body larger than {max_body} bytes")
            return bytes(body)
        finally:
            budget.give(len(body))

    async def admit(request: Request) -> Caller | Response:
        """§8.3.1 then §6.1: the Origin, then the credential; a Response refuses the request."""
        if not guard.permits(request.headers.get("origin")):
            return _plain(403, "origin not allowed")
        authorization = _header_values(request, b"authorization")
        if len(authorization) > 1:
            return _plain(400, "more than one Authorization header")
        try:
            principal = await auth.authenticate(
                authorization[0].decode("latin-1") if authorization else None
            )
        except AuthenticationError as exc:
            client = request.client.host if request.client else "unknown"
            wait_ms = failed_auth.acquire(client)
            if wait_ms is not None:
                # Limited: no line per attempt, so a flood cannot flood the log either.
                retry = str(max(1, -(-wait_ms // 1000)))
                return _plain(429, "too many failed authentications", {"Retry-After": retry})
            # The reason names what was wrong, never the credential.
            audit.info("auth_failed", extra={"reason": exc.reason, "client": client})
            return _plain(
                401, "authentication required", headers={"WWW-Authenticate": auth.challenge(exc)}
            )
        return Caller(network=True, principal=principal, prepaid=gateway.limiter is not None)

    def charge(caller: Caller, store: str | None) -> Response | None:
        """The caller's rate limit, taken before its body is read (a JSON-RPC error if spent).

        The body is never read, so the error's id is null and no method is known.
        """
        key = caller.rate_key
        if gateway.limiter is None or key is None:
            return None
        wait_ms = gateway.limiter.acquire(key)
        if wait_ms is None:
            return None
        err = QuotaExceeded("Rate limit exceeded for this caller", data={"retry_after_ms": wait_ms})
        audit.info(
            "call",
            extra={
                "store": store or gateway.default_store,
                "method": None,
                "principal": caller.label[:300],
                "code": int(err.code),
            },
        )
        return Response(error_body(None, err), status_code=200, media_type=JSON)

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
        refused = charge(caller, store)
        if refused is not None:
            return refused
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
        refused = charge(caller, store)
        if refused is not None:
            return Response(refused.body, status_code=429, media_type=JSON)
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

    @app.get("/")
    async def index(request: Request) -> Response:
        # Open like /healthz: it names only this server's fixed URL scheme. Store names are
        # the operator's, but with auth on they are left to the (authenticated) discovery doc.
        page = index_page(None if auth.enabled else list(gateway.stores))
        if prefers_html(request.headers.get("accept", "")):
            return Response(as_html(page), media_type="text/html; charset=utf-8")
        return Response(orjson.dumps(page), media_type=JSON)

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

    if mcp is not None:
        # MCP, the second front door onto the same dispatchers (gateway/mcp/, docs/mcp.md).
        for path in ("/mcp", "/mcp/{store}", "/.well-known/oauth-protected-resource{rest:path}"):
            app.router.add_route(path, mcp, include_in_schema=False)

    app.rpc_handler = rpc
    return app


def _mcp_app(
    gateway: Gateway, server: ServerConfig, auth: Authenticator, guard: OriginGuard
) -> Any:
    if not server.mcp.enabled:
        return None
    from gateway.mcp.server import McpHttpApp

    return McpHttpApp(gateway, server, auth, guard.permits)
