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
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from gateway.config import ServerConfig, is_loopback
from gateway.observability.metrics import Metrics
from gateway.observability.telemetry import configure_from_env as configure_tracing
from gateway.runtime import Gateway
from gateway.security.auth import Authenticator
from gateway.transports.admission import Admission, plain
from gateway.transports.edge import CLOSE, BodyWatch, measure_head
from gateway.transports.endpoints import A2MEndpoints, OperatorEndpoints
from gateway.transports.head_deadline import HEAD_TOO_LARGE_MESSAGE
from gateway.transports.mcp_door import McpDoor
from gateway.transports.try_page import add_try_page

log = logging.getLogger(__name__)
audit = logging.getLogger("a2m.audit")


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
CLOSING_HEADERS = [*SECURITY_HEADERS, CLOSE]


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

    That layer, in order: the head's size (431, transports.edge), the Host check
    (421), the security headers, ``Connection: close`` on an answer sent before
    the request's body was read (transports.edge), the ``a2m_http_responses``
    count on every response, and the error handler (a
    client gone mid-body is logged at debug; any other exception is logged once
    and, if nothing was sent yet, answered 500 with a fixed body: never a raw
    traceback). Inside it, ``POST /a2m`` and ``POST /a2m/{store}`` (the hot
    path) go straight to the handler the routes use, and ``/mcp`` and
    ``/mcp/{store}`` to the MCP door, skipping Starlette's middleware and
    router; every other route and lifespan go through them.
    """

    rpc_handler: Any = None
    mcp_door: Any = None
    max_head_bytes: int = 16_384
    host_guard: HostGuard | None = None
    metrics: Metrics | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return

        plain_send = send
        status: int | None = None
        size, announced = measure_head(scope)
        body = BodyWatch(receive, announced)

        async def send_secured(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                # An answer before the body's end closes the connection (transports.edge).
                extra = CLOSING_HEADERS if body.must_close else SECURITY_HEADERS
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await plain_send(message)

        try:
            if size > self.max_head_bytes:
                body.must_close = True
                await plain(431, HEAD_TOO_LARGE_MESSAGE)(scope, receive, send_secured)
            else:
                await self._serve(scope, body.receive if announced else receive, send_secured)
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
        path = route_path(scope)
        handler = self.rpc_handler
        if handler is not None and scope["method"] == "POST":
            hit, store = _door_path(path, "/a2m")
            if hit:
                response = await handler(Request(scope, receive), store)
                await response(scope, receive, send)
                return
        door = self.mcp_door
        if door is not None and _door_path(path, "/mcp")[0]:
            # The door reads its store from the path: the app's own, under any mount.
            inner = scope if path == scope["path"] else {**scope, "path": path}
            await door(inner, receive, send)  # every method: the door answers each
            return
        await super().__call__(scope, receive, send)


def route_path(scope: Any) -> str:
    """The request's path within this app: without the ``root_path`` a mount put before it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def _door_path(path: str, prefix: str) -> tuple[bool, str | None]:
    """Whether `path` is `prefix` or `prefix/{store}` as the router matches it (one
    non-empty segment), and the store it names (None: the bare prefix)."""
    if path == prefix:
        return True, None
    if not path.startswith(prefix) or path[len(prefix) : len(prefix) + 1] != "/":
        return False, None
    store = path[len(prefix) + 1 :]
    return bool(store) and "/" not in store, store


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

    app = _A2MApp(lifespan=_lifespan(gateway, mcp, strict=strict_start))
    # A redirect would send a POST (and its credential) to whatever Host said.
    app.router.redirect_slashes = False
    app.add_exception_handler(StarletteHTTPException, _transport_refusal)
    app.host_guard = hosts
    app.max_head_bytes = server.http.max_header_bytes
    app.metrics = metrics
    app.state.body_budget = admission.budget
    a2m = A2MEndpoints(gateway, admission, metrics)
    operator = OperatorEndpoints(gateway, server, auth, metrics, mcp=mcp is not None)
    app.router.routes += [*a2m.routes(), *operator.routes()]
    if server.try_page:
        add_try_page(app, gateway, admission)

    if mcp is not None:
        # MCP, the second front door onto the same dispatchers (gateway/mcp/, docs/mcp.md);
        # an ASGI app as the endpoint: every method reaches it.
        door: Any = mcp
        for path in ("/mcp", "/mcp/{store}", "/.well-known/oauth-protected-resource{rest:path}"):
            app.router.add_route(path, door, include_in_schema=False)
        app.mcp_door = door

    app.rpc_handler = a2m.rpc
    return app


def _lifespan(
    gateway: Gateway, mcp: McpDoor | None, *, strict: bool
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """Open the stores when the server starts; close the MCP sessions, then the stores."""

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await gateway.start(strict=strict)
        try:
            yield
        finally:
            if mcp is not None:
                await mcp.close()
            await gateway.close()

    return lifespan


async def _transport_refusal(request: Request, exc: Exception) -> Response:
    """The router's own refusals (a GET on /a2m: 405, an unknown path: 404) in the one
    transport shape of the A2M door, ``{"error": message}``, as admission answers."""
    assert isinstance(exc, StarletteHTTPException)
    return plain(exc.status_code, str(exc.detail).lower(), dict(exc.headers or {}))


def _mcp_door(gateway: Gateway, server: ServerConfig, admission: Admission) -> McpDoor | None:
    return McpDoor(gateway, server, admission) if server.mcp.enabled else None
