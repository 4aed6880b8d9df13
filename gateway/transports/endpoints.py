"""The HTTP routes' handlers: the A2M door (JSON-RPC and discovery) and the operator pages.

gateway/transports/http.py builds the app around them; the handlers hold no
Starlette wiring, so the hot path (`A2MEndpoints.rpc`) can be called directly.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from gateway import PROTOCOL
from gateway.a2m.dispatcher import Dispatcher
from gateway.a2m.errors import A2MError, ErrorCode, ProtocolNotSupported
from gateway.a2m.jsonrpc import error_body, handle_message
from gateway.config import ServerConfig
from gateway.observability.metrics import Metrics
from gateway.observability.telemetry import active as active_tracing
from gateway.runtime import Gateway, UnknownStore
from gateway.security.auth import Authenticator
from gateway.security.scopes import Caller
from gateway.transports.admission import Admission, RequestHead, plain
from gateway.transports.index_page import as_html, doc_file, index_page, prefers_html
from gateway.transports.routes import route
from gateway.transports.try_page import try_page_response

JSON = "application/json"


class A2MEndpoints:
    """POST /a2m[/{store}] and the discovery documents, each admitted before it is read."""

    def __init__(self, gateway: Gateway, admission: Admission, metrics: Metrics) -> None:
        self._gateway = gateway
        self._metrics = metrics
        self._admit, self._charge = admission.admit, admission.charge
        self._read_body = admission.read_body
        # Built once: the answer to every call naming another protocol version.
        self._unsupported_version = error_body(
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
        self._endpoints = endpoints
        # Fixed at start: which dispatcher a path names (None: the default store's).
        self._dispatchers: dict[str | None, Dispatcher] = {
            n: d for n, d in gateway.dispatchers.items()
        }
        self._dispatchers[None] = gateway.dispatcher()

    def routes(self) -> list[BaseRoute]:
        return [
            route("POST", "/a2m/{store}", self.rpc_store),
            route("POST", "/a2m", self.rpc_default),
            route("GET", "/.well-known/a2m-server.json", self.well_known),
            route("GET", "/a2m/{store}/.well-known/a2m-server.json", self.well_known_store),
        ]

    async def rpc(self, request: Request, store: str | None) -> Response:
        head = RequestHead(request.scope["headers"])
        caller = await self._admit(request, head=head)
        if isinstance(caller, Response):
            return caller
        version = head.version
        if version is not None and version.strip() != PROTOCOL:
            return Response(self._unsupported_version, status_code=400, media_type=JSON)
        ctype = head.media_type()
        if ctype != JSON and not ctype.endswith("+json"):
            return plain(415, "Content-Type must be application/json")
        dispatcher = self._dispatchers.get(store)
        if dispatcher is None:
            return plain(404, "no such store")
        refused = await self._charge(caller, store)
        if refused is not None:
            return refused
        body = await self._read_body(request, head)
        if isinstance(body, Response):
            return body
        dispatch = partial(dispatcher.dispatch, caller=caller)

        inflight = self._metrics.inflight
        inflight.inc()
        try:
            tracing = active_tracing()
            if tracing is None:
                out = await handle_message(body, dispatch)
            else:
                with tracing.incoming(request.headers):  # the caller's traceparent
                    out = await handle_message(body, dispatch)
        finally:
            inflight.dec()
        if out is None:
            return Response(status_code=202)
        return Response(out, status_code=200, media_type=JSON)

    async def rpc_store(self, request: Request) -> Response:
        return await self.rpc(request, request.path_params["store"])

    async def rpc_default(self, request: Request) -> Response:
        return await self.rpc(request, None)

    async def describe_doc(self, request: Request, store: str | None) -> Response:
        caller = await self._admit(request)
        if isinstance(caller, Response):
            return caller
        try:
            dispatcher = self._gateway.dispatcher(store)
        except UnknownStore:
            return plain(404, "no such store")
        refused = await self._charge(caller, store)
        if refused is not None:
            return Response(refused.body, status_code=429, media_type=JSON)
        try:
            result: dict[str, Any] = await dispatcher.dispatch("memory/describe", {}, caller)
        except A2MError as err:  # the dispatcher maps every failure to one
            status = _DESCRIBE_STATUS.get(err.code, 503)
            return Response(error_body(None, err), status_code=status, media_type=JSON)
        if store is None:
            result = {**result, **self._visible_endpoints(caller)}
        return Response(orjson.dumps(result), media_type=JSON)

    def _visible_endpoints(self, caller: Caller) -> dict[str, dict[str, str]]:
        """The endpoints map, without the stores and federations `caller` may not use."""
        gateway = self._gateway
        shown: dict[str, dict[str, str]] = {}
        for kind, sources in (("stores", gateway.stores), ("federations", gateway.federations)):
            if kind in self._endpoints:
                listed = self._endpoints[kind]
                shown[kind] = {n: path for n, path in listed.items() if sources[n].admits(caller)}
        return shown

    async def well_known(self, request: Request) -> Response:
        return await self.describe_doc(request, None)

    async def well_known_store(self, request: Request) -> Response:
        return await self.describe_doc(request, request.path_params["store"])


_DESCRIBE_STATUS = {ErrorCode.QUOTA_EXCEEDED: 429, ErrorCode.SCOPE_DENIED: 403}
"""A well-known document's status when its describe is refused; engine trouble is 503."""


class OperatorEndpoints:
    """GET /, /healthz, /readyz and /metrics: open without a credential, for probes."""

    def __init__(
        self,
        gateway: Gateway,
        server: ServerConfig,
        auth: Authenticator,
        metrics: Metrics,
        *,
        mcp: bool,
    ) -> None:
        self._gateway = gateway
        self._try_page = server.try_page
        self._auth = auth
        self._metrics = metrics
        self._mcp = mcp

    def routes(self) -> list[BaseRoute]:
        return [
            route("GET", "/", self.index),
            route("GET", "/docs/{name}", self.doc),
            route("GET", "/healthz", self.healthz),
            route("GET", "/readyz", self.readyz),
            route("GET", "/metrics", self.prometheus),
        ]

    async def index(self, request: Request) -> Response:
        # Open like /healthz: it names only this server's fixed URL scheme. Store names are
        # the operator's, but with auth on they are left to the (authenticated) discovery doc.
        stores = None if self._auth.enabled else list(self._gateway.stores)
        page = index_page(stores, mcp=self._mcp)
        if self._try_page:
            page["endpoints"]["GET /try"] = "the try page: query a store from a browser"
        if prefers_html(request.headers.get("accept", "")):
            if self._try_page:
                return try_page_response()
            return Response(as_html(page), media_type="text/html; charset=utf-8")
        return Response(orjson.dumps(page), media_type=JSON)

    async def doc(self, request: Request) -> Response:
        """One of the gateway's own docs (README, protocol, ...), as Markdown, where installed."""
        path = doc_file(request.path_params["name"])
        if path is None:
            return plain(404, "not found")
        return Response(path.read_bytes(), media_type="text/markdown; charset=utf-8")

    async def healthz(self, _: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    async def readyz(self, _: Request) -> Response:
        gateway = self._gateway
        states = await gateway.ready()
        ok = all(states.values())
        body: dict[str, Any] = {"status": "ready" if ok else "not ready", "stores": states}
        if breakers := gateway.breakers():
            body["breakers"] = breakers
        if gateway.federations:
            body["federations"] = await gateway.federations_ready()
        return Response(orjson.dumps(body), status_code=200 if ok else 503, media_type=JSON)

    async def prometheus(self, _: Request) -> Response:
        return Response(self._metrics.render(), media_type=CONTENT_TYPE_LATEST)
