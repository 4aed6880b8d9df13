"""HTTP binding (§8.3): one POST endpoint per store, plus discovery and operator endpoints.

URL scheme:
  POST /a2m/{store}                          A2M JSON-RPC for one store
  POST /a2m                                  the default (first configured) store
  GET  /.well-known/a2m-server.json          the default store's describe, plus `stores` and
                                            `federations` maps
  GET  /a2m/{store}/.well-known/a2m-server.json   one store's describe
  GET  /healthz   process alive      GET /readyz   every engine reachable (503 otherwise)
  GET  /metrics   Prometheus text format
  GET  /          what this server is and where its endpoints and docs are (JSON; a browser
                  gets the try page, or an HTML listing with server.try_page off)
  GET  /try       the try page (gateway/transports/try_page.py); POST /try/preview/{store}
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

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from gateway import PROTOCOL
from gateway.a2m.errors import A2MError, ErrorCode, ProtocolNotSupported
from gateway.a2m.jsonrpc import error_body, handle_message
from gateway.config import ServerConfig, is_loopback
from gateway.observability.metrics import Metrics
from gateway.observability.telemetry import active as active_tracing
from gateway.observability.telemetry import configure_from_env as configure_tracing
from gateway.runtime import Gateway, UnknownStore
from gateway.security.auth import Authenticator
from gateway.transports.admission import Admission, RequestHead, plain
from gateway.transports.index_page import as_html, index_page, prefers_html
from gateway.transports.mcp_door import McpDoor
from gateway.transports.routes import route
from gateway.transports.try_page import add_try_page, try_page_response

log = logging.getLogger(__name__)
audit = logging.getLogger("a2m.audit")

JSON = "application/json"


class OriginGuard:
    """§8.3.1: a request with an Origin not on the allow-list is refused; no Origin is fine.

    With ``same_origin`` (the try page is served and the Host header is checked), an
    Origin naming the very host:port the request was sent to is the gateway's own page.
    """

    def __init__(self, allowed: list[str], *, same_origin: bool = False) -> None:
        self._allowed = frozenset(o.rstrip("/").lower() for o in allowed)
        self._same_origin = same_origin

    def permits(self, origin: str | None, host: str | None = None) -> bool:
        if origin is None:
            return True
        origin = origin.rstrip("/").lower()
        if origin in self._allowed:
            return True
        if not self._same_origin or not host:
            return False
        _, sep, netloc = origin.partition("://")
        return bool(sep) and netloc == host.strip().lower()


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


class _A2MApp(Starlette):
    """The gateway's ASGI app: Starlette behind one outermost layer every request passes.

    That layer, in order: the Host check (421), the security headers and the
    ``a2m_http_responses`` count on every response, and the error handler (a
    client gone mid-body is logged at debug; any other exception is logged once
    and, if nothing was sent yet, answered 500 with a fixed body: never a raw
    traceback). Inside it, ``POST /a2m`` and ``POST /a2m/{store}`` (the hot
    path) go straight to the handler the routes use, skipping Starlette's
    middleware and router; every other route, the MCP door included, and
    lifespan go through them.
    """

    rpc_handler: Any = None
    host_guard: HostGuard | None = None
    metrics: Metrics | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return

        plain_send = send
        status: int | None = None

        async def send_secured(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await plain_send(message)

        try:
            await self._serve(scope, receive, send_secured)
        except ClientDisconnect:
            log.debug("client disconnected before its request was read")
        except Exception:  # the outermost handler: whatever a route let escape
            log.exception("unhandled error serving %s", scope.get("method"))
            if status is None:
                await plain(500, "internal error")(scope, receive, send_secured)
        finally:
            if status is not None and self.metrics is not None:
                self.metrics.observe_http(status)

    async def _serve(self, scope: Any, receive: Any, send: Any) -> None:
        guard = self.host_guard
        if guard is not None and guard.enabled:
            hosts = [v for k, v in scope["headers"] if k == b"host"]
            host = hosts[0].decode("latin-1") if len(hosts) == 1 else None
            if not guard.permits(host):
                await plain(421, "unknown host")(scope, receive, send)
                return
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
) -> Starlette:
    """The ASGI app serving every store of `gateway`.

    Raises:
        ConfigError: the JWKS file of server.auth.jwt cannot be read.
    """
    configure_tracing()  # before the stores open: their engine clients are traced from the start
    metrics = metrics or Metrics()
    hosts = HostGuard(server.allowed_hosts, bind_host or server.host)
    guard = OriginGuard(server.allowed_origins, same_origin=server.try_page and hosts.enabled)
    auth = authenticator or Authenticator(server.auth)
    admission = Admission(gateway, server, auth, guard.permits)
    mcp = _mcp_door(gateway, server, admission)
    for federation in gateway.federations.values():
        federation.observe_left_out(metrics.observe_left_out)
    metrics.watch_guards({name: store.guard for name, store in gateway.stores.items()})
    if gateway.limiter is not None and gateway.limiter.health is not None:
        metrics.watch_quota(gateway.limiter.health)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await gateway.start(strict=strict_start)
        try:
            yield
        finally:
            if mcp is not None:
                await mcp.close()
            await gateway.close()

    app = _A2MApp(lifespan=lifespan)
    # A redirect would send a POST (and its credential) to whatever Host said.
    app.router.redirect_slashes = False
    app.add_exception_handler(StarletteHTTPException, _transport_refusal)
    app.host_guard = hosts
    app.metrics = metrics
    app.state.body_budget = admission.budget
    admit, charge, read_body = admission.admit, admission.charge, admission.read_body
    unsupported_version = error_body(
        None,
        ProtocolNotSupported(
            f"Protocol version header names a version this server does not speak; "
            f"it speaks {PROTOCOL}",
            data={"supported": [PROTOCOL]},
        ),
    )
    endpoints = {"stores": {n: f"/a2m/{n}" for n in gateway.stores}}
    if gateway.federations:
        endpoints["federations"] = {n: f"/a2m/{n}" for n in gateway.federations}

    async def rpc(request: Request, store: str | None) -> Response:
        head = RequestHead(request.scope["headers"])
        caller = await admit(request, head=head)
        if isinstance(caller, Response):
            return caller
        version = head.version
        if version is not None and version.strip() != PROTOCOL:
            return Response(unsupported_version, status_code=400, media_type=JSON)
        ctype = head.media_type()
        if ctype != JSON and not ctype.endswith("+json"):
            return plain(415, "Content-Type must be application/json")
        try:
            dispatcher = gateway.dispatcher(store)
        except UnknownStore:
            return plain(404, "no such store")
        refused = await charge(caller, store)
        if refused is not None:
            return refused
        body = await read_body(request, head)
        if isinstance(body, Response):
            return body

        async def dispatch(method: str, params: Any) -> Any:
            return await dispatcher.dispatch(method, params, caller)

        metrics.inflight.inc()
        try:
            tracing = active_tracing()
            if tracing is None:
                out = await handle_message(body, dispatch)
            else:
                with tracing.incoming(request.headers):  # the caller's traceparent
                    out = await handle_message(body, dispatch)
        finally:
            metrics.inflight.dec()
        if out is None:
            return Response(status_code=202)
        return Response(out, status_code=200, media_type=JSON)

    async def rpc_store(request: Request) -> Response:
        return await rpc(request, request.path_params["store"])

    async def rpc_default(request: Request) -> Response:
        return await rpc(request, None)

    async def describe_doc(request: Request, store: str | None) -> Response:
        caller = await admit(request)
        if isinstance(caller, Response):
            return caller
        try:
            dispatcher = gateway.dispatcher(store)
        except UnknownStore:
            return plain(404, "no such store")
        refused = await charge(caller, store)
        if refused is not None:
            return Response(refused.body, status_code=429, media_type=JSON)
        try:
            result: dict[str, Any] = await dispatcher.dispatch("memory/describe", {}, caller)
        except A2MError as err:  # the dispatcher maps every failure to one
            status = 429 if err.code is ErrorCode.QUOTA_EXCEEDED else 503
            return Response(error_body(None, err), status_code=status, media_type=JSON)
        if store is None:
            result = {**result, **endpoints}
        return Response(orjson.dumps(result), media_type=JSON)

    async def well_known(request: Request) -> Response:
        return await describe_doc(request, None)

    async def well_known_store(request: Request) -> Response:
        return await describe_doc(request, request.path_params["store"])

    async def index(request: Request) -> Response:
        # Open like /healthz: it names only this server's fixed URL scheme. Store names are
        # the operator's, but with auth on they are left to the (authenticated) discovery doc.
        page = index_page(None if auth.enabled else list(gateway.stores), mcp=mcp is not None)
        if server.try_page:
            page["endpoints"]["GET /try"] = "the try page: query a store from a browser"
        if prefers_html(request.headers.get("accept", "")):
            if server.try_page:
                return try_page_response()
            return Response(as_html(page), media_type="text/html; charset=utf-8")
        return Response(orjson.dumps(page), media_type=JSON)

    async def healthz(_: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    async def readyz(_: Request) -> Response:
        states = await gateway.ready()
        ok = all(states.values())
        body: dict[str, Any] = {"status": "ready" if ok else "not ready", "stores": states}
        if breakers := gateway.breakers():
            body["breakers"] = breakers
        if gateway.federations:
            body["federations"] = await gateway.federations_ready()
        return Response(orjson.dumps(body), status_code=200 if ok else 503, media_type=JSON)

    async def prometheus(_: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app.router.routes += [
        route("POST", "/a2m/{store}", rpc_store),
        route("POST", "/a2m", rpc_default),
        route("GET", "/.well-known/a2m-server.json", well_known),
        route("GET", "/a2m/{store}/.well-known/a2m-server.json", well_known_store),
        route("GET", "/", index),
        route("GET", "/healthz", healthz),
        route("GET", "/readyz", readyz),
        route("GET", "/metrics", prometheus),
    ]
    if server.try_page:
        add_try_page(app, gateway, admission)

    if mcp is not None:
        # MCP, the second front door onto the same dispatchers (gateway/mcp/, docs/mcp.md);
        # an ASGI app as the endpoint: every method reaches it.
        door: Any = mcp
        for path in ("/mcp", "/mcp/{store}", "/.well-known/oauth-protected-resource{rest:path}"):
            app.router.add_route(path, door, include_in_schema=False)

    app.rpc_handler = rpc
    return app


async def _transport_refusal(request: Request, exc: Exception) -> Response:
    """The router's own refusals (a GET on /a2m: 405, an unknown path: 404) in the one
    transport shape of the A2M door, ``{"error": message}``, as admission answers."""
    assert isinstance(exc, StarletteHTTPException)
    return plain(exc.status_code, str(exc.detail).lower(), dict(exc.headers or {}))


def _mcp_door(gateway: Gateway, server: ServerConfig, admission: Admission) -> McpDoor | None:
    return McpDoor(gateway, server, admission) if server.mcp.enabled else None
