"""Serving the tools: the MCP SDK's low-level server over Streamable HTTP and stdio.

Streamable HTTP runs the SDK stateless, JSON responses: a 2026-07-28 request
is one self-contained POST (``server/discover``, no session), and a 2025-11-25
client's ``initialize`` is answered on its own POST with every later call
served without a session, so any replica can answer any request. Before the
SDK sees a request, :class:`McpHttpApp` applies the gateway's Origin check
and bearer authentication and puts the endpoint and caller on the ASGI scope,
where the tool handler reads them; a well-formed 2026-07-28 ``tools/call`` is
answered by :mod:`gateway.mcp.single_call` with the SDK's checks and shaping,
without its per-request machinery.

Authentication follows the MCP authorization spec: a 401 carries
``WWW-Authenticate: Bearer ... resource_metadata="..."`` pointing at the RFC
9728 document served at ``/.well-known/oauth-protected-resource[/mcp[/<store>]]``;
with ``server.mcp.audience_check`` a JWT must name the resource (RFC 8707).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from gateway import __version__
from gateway.a2m.errors import A2MError, InternalError, InvalidRequest, ParseError
from gateway.a2m.jsonrpc import error_body
from gateway.config import STORE_NAME, ServerConfig
from gateway.mcp.sdk_refusals import NOT_ONE_MESSAGE, in_own_words
from gateway.mcp.single_call import SingleCall
from gateway.mcp.stdio_lines import answered_to_the_end
from gateway.mcp.tools import Endpoint, McpTools
from gateway.observability.client_name import CLIENT_INFO_META_KEY, client_name, mcp_client
from gateway.observability.telemetry import active as active_tracing
from gateway.runtime import Gateway
from gateway.security.credential import AuthenticationError
from gateway.security.scopes import LOCAL, Caller, Principal
from gateway.transports.admission import Admission, RequestHead

log = logging.getLogger(__name__)
audit = logging.getLogger("a2m.audit")

SCOPE_KEY = "a2m.mcp"
"""ASGI scope entry holding (Endpoint, Caller) of an authenticated MCP request."""
PRM_PATH = "/.well-known/oauth-protected-resource"
_HOST = re.compile(r"[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](:[0-9]{1,5})?")
INSTRUCTIONS = (
    "Read-only retrieval over the organisation's indexes. Use `search` to find records, "
    "`fetch` to read one in full by its id, `timeline` for the newest records. Cite results "
    "with their marker ([1], [2], ...) and url. Every result is limited to what the caller's "
    "credential may see."
)


def named_by(caller: Caller, client: str | None) -> Caller:
    """`caller` as named by MCP's clientInfo, which wins over the HTTP headers' name."""
    name = client_name(client)
    return caller if name is None else dataclasses.replace(caller, client=name)


def build_server(tools: McpTools, fixed: Endpoint | None = None) -> Server[Any]:
    """The SDK server; `fixed` serves stdio (no HTTP request to read the endpoint from)."""

    def context(ctx: ServerRequestContext[Any, Any]) -> tuple[Endpoint, Caller]:
        request = ctx.request
        if request is not None and SCOPE_KEY in request.scope:
            found: tuple[Endpoint, Caller] = request.scope[SCOPE_KEY]
            return found
        if fixed is not None:
            return fixed, LOCAL
        # An HTTP request that did not pass McpHttpApp: refuse rather than guess a caller.
        raise RuntimeError("MCP request without an authenticated endpoint")

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        endpoint, caller = context(ctx)
        return types.ListToolsResult(tools=await tools.list_tools(endpoint, caller))

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        endpoint, caller = context(ctx)
        headers = ctx.request.headers if ctx.request is not None else None
        session = ctx.session.client_params  # the initialize request's clientInfo, if any
        if session is not None:
            caller = named_by(caller, mcp_client(session.client_info))
        return await call_tool(tools, endpoint, caller, params, headers)

    def no_header_params(name: str) -> None:
        # No tool argument is declared `x-mcp-header`, so there are no Mcp-Param-* headers to
        # validate; without this the SDK would run tools/list before every 2026-07-28 call.
        return None

    server: Server[Any] = Server(
        "a2m-gateway",
        version=__version__,
        title="a2m-gateway",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=no_header_params,
    )
    # The SDK's default middleware is one OpenTelemetry span per message, on the global
    # tracer provider. The gateway makes each tool call's span itself, on its own provider
    # (observability.tracing), so the SDK's would be a no-op costing CPU on every call, or,
    # under an auto-instrumented process, a second span for the same call.
    server.middleware.clear()
    return server


async def call_tool(
    tools: McpTools,
    endpoint: Endpoint,
    caller: Caller,
    params: types.CallToolRequestParams,
    headers: Mapping[str, str] | None,
) -> types.CallToolResult:
    """One tool call, in the trace context of its message or else of its HTTP request."""
    if params.meta is not None:  # a 2026-07-28 request names its client in _meta
        meta: Mapping[str, Any] = params.meta
        info = meta.get(CLIENT_INFO_META_KEY)
        caller = named_by(caller, mcp_client(info))
    tracing = active_tracing()
    if tracing is None:
        return await tools.call(endpoint, params.name, params.arguments, caller)
    # The message's own _meta traceparent wins over the HTTP request's (MCP's context).
    with tracing.incoming(params.meta, headers):
        return await tools.call(endpoint, params.name, params.arguments, caller)


class McpHttpApp:
    """ASGI app of `/mcp`, `/mcp/<store>` and the protected resource metadata."""

    def __init__(self, gateway: Gateway, server: ServerConfig, admission: Admission) -> None:
        self._gateway = gateway
        self._cfg = server.mcp
        self._admission = admission
        self._auth = admission.auth
        issuer = [server.auth.jwt.issuer] if server.auth.jwt is not None else []
        self._authorization_servers = list(server.mcp.authorization_servers) or issuer
        self._server_name = server.name
        self._max_body = server.max_body_bytes
        self._body_timeout_s = server.body_timeout_ms / 1000
        self._tools = McpTools(gateway, server.mcp)
        sdk_server = build_server(self._tools)
        self._manager = StreamableHTTPSessionManager(
            app=sdk_server,
            json_response=True,
            stateless=True,
            max_request_body_size=server.max_body_bytes,
        )
        self._single = SingleCall(sdk_server.server_info_stamp)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    def _endpoint(self, path: str) -> Endpoint | None:
        """The endpoint of a path under /mcp; None for an unknown store."""
        rest = path[len("/mcp") :].strip("/")
        if not rest:
            return Endpoint()
        return Endpoint(rest) if self._served(rest) else None

    def _served(self, name: str) -> bool:
        """A store or a federation of this gateway (both are MCP stores)."""
        return name in self._gateway.stores or name in self._gateway.federations

    def _resource(self, scope: Scope, path: str) -> str:
        """The resource identifier (RFC 9728 §1.2) of an MCP path.

        The same for a served name and any other well-formed one (before
        authentication, nothing tells them apart); a path naming no well-formed
        store is /mcp's. Built only from a well-formed store name and Host, since
        it is echoed into a quoted WWW-Authenticate parameter.
        """
        name = _path_name(path)
        suffix = f"/{name}" if name else ""
        if self._cfg.resource is not None:
            return self._cfg.resource.rstrip("/") + suffix
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        if not _HOST.fullmatch(host):
            host = "localhost"
        scheme = "https" if scope.get("scheme") == "https" else "http"
        return f"{scheme}://{host}/mcp{suffix}"

    def _metadata_url(self, resource: str) -> str:
        """RFC 9728 §3.1: the well-known segment goes between the origin and the path."""
        scheme, _, rest = resource.partition("://")
        host, slash, path = rest.partition("/")
        return f"{scheme}://{host}{PRM_PATH}" + (f"/{path}" if slash and path else "")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if path.startswith(PRM_PATH):
            await self._metadata(scope, receive, send, path[len(PRM_PATH) :] or "/mcp")
            return
        request = Request(scope, receive)

        def resource_metadata() -> str:
            return f', resource_metadata="{self._metadata_url(self._resource(scope, path))}"'

        # The same admission as the A2M door (gateway.transports.admission).
        head = RequestHead(scope["headers"])
        caller = await self._admission.admit(
            request,
            audience=partial(self._check_audience, scope, path),
            challenge_extra=resource_metadata,
            head=head,
        )
        if isinstance(caller, Response):
            await as_rpc_refusal(caller)(scope, receive, send)
            return
        endpoint = self._endpoint(path)
        if endpoint is None:  # after authentication, so store names are not probed anonymously
            await _rpc_error(send, InvalidRequest("no such store"), 404)
            return
        if scope["method"] != "POST":
            # Stateless, JSON responses: no standalone SSE stream and no session to delete.
            await _rpc_error(send, InvalidRequest("method not allowed"), 405, {"allow": "POST"})
            return
        ctype = head.media_type()
        if ctype != "application/json" and not ctype.endswith("+json"):
            error = InvalidRequest("Content-Type must be application/json")
            await _rpc_error(send, error, 415)
            return
        refused = await self._admission.charge(caller, endpoint.store)
        if refused is not None:
            await refused(scope, receive, send)
            return
        raw = await self._admission.read_body(request, head)
        if isinstance(raw, Response):
            await as_rpc_refusal(raw)(scope, receive, send)
            return
        message = await self._envelope(raw, send)
        if message is None:
            return
        accepted = self._single.accepts(request, message)
        if accepted is not None:
            version, params = accepted
            result = call_tool(self._tools, endpoint, caller, params, request.headers)
            await self._single.serve(version, message["id"], result, send)
            return
        await self._to_sdk({**scope, SCOPE_KEY: (endpoint, caller)}, raw, receive, send)

    async def _to_sdk(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """The SDK's Streamable HTTP entry, given the body admission has already read; its
        refusals of a message it cannot parse or validate leave in the door's words."""
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self._manager.handle_request(scope, replay, in_own_words(send))

    def _check_audience(self, scope: Scope, path: str, principal: Principal) -> None:
        """Raises: AuthenticationError: a JWT whose audience names neither this path nor /mcp."""
        if not (self._cfg.audience_check and principal.method == "jwt"):
            return
        aud = principal.claims.get("aud")
        auds = [aud] if isinstance(aud, str) else list(aud or [])
        if self._resource(scope, path) not in auds and self._resource(scope, "/mcp") not in auds:
            raise AuthenticationError("JWT audience does not name this MCP resource")

    async def _envelope(self, body: bytes, send: Send) -> dict[str, Any] | None:
        """The body's message, once it is one JSON-RPC message; else answered here and None.

        The SDK's own envelope errors quote pydantic's text (and the input); ours
        name the problem only, as A2M's do.
        """
        try:
            msg = orjson.loads(body)
        except orjson.JSONDecodeError:
            await _rpc_error(send, ParseError())
            return None
        if not _is_message(msg):
            await _rpc_error(send, InvalidRequest(NOT_ONE_MESSAGE))
            return None
        message: dict[str, Any] = msg
        return message

    async def _metadata(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        """RFC 9728 protected resource metadata of /mcp or /mcp/<any well-formed store name>."""
        if scope["method"] not in ("GET", "HEAD"):
            await _json(send, 405, {"error": "method not allowed"}, {"allow": "GET"})
            return
        # Any well-formed name, served or not: whether a store exists is learnt after
        # authentication only (docs/mcp.md, SECURITY.md).
        if not self._auth.enabled or _path_name(path) is None:
            await _json(send, 404, {"error": "not found"})
            return
        doc: dict[str, Any] = {
            "resource": self._resource(scope, path),
            "bearer_methods_supported": ["header"],
            "resource_name": self._server_name,
        }
        if self._authorization_servers:
            doc["authorization_servers"] = self._authorization_servers
        if self._cfg.scopes_supported:
            doc["scopes_supported"] = self._cfg.scopes_supported
        await _json(send, 200, doc)


def _path_name(path: str) -> str | None:
    """'' for /mcp, `name` for /mcp/<name> when `name` is a well-formed store name (served
    or not); None for any other path."""
    if path != "/mcp" and not path.startswith("/mcp/"):
        return None
    rest = path[len("/mcp") :].strip("/")
    return rest if not rest or STORE_NAME.fullmatch(rest) else None


def _is_message(msg: Any) -> bool:
    """One JSON-RPC 2.0 request, notification or response object (batches are not MCP)."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return False
    rid = msg.get("id")
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, str | int)):
        return False
    if "method" in msg:
        return isinstance(msg["method"], str) and isinstance(msg.get("params", {}), dict)
    return "id" in msg and ("result" in msg) != ("error" in msg)


def as_rpc_refusal(response: Response) -> Response:
    """An admission refusal in the MCP door's one error shape, status and headers kept.

    Admission answers ``{"error": message}``, the A2M door's transport shape; MCP's
    Streamable HTTP binding answers an HTTP error with a JSON-RPC error response whose
    id is null, as the SDK does for its own refusals. A refusal already in that shape
    (a spent rate limit) passes unchanged.
    """
    try:
        message = orjson.loads(bytes(response.body)).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        return response
    if not isinstance(message, str):
        return response
    error = InternalError(message) if response.status_code >= 500 else InvalidRequest(message)
    kept = {
        k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")
    }
    return Response(
        error_body(None, error),
        status_code=response.status_code,
        media_type="application/json",
        headers=kept,
    )


async def _rpc_error(
    send: Send, error: A2MError, status: int = 400, headers: dict[str, str] | None = None
) -> None:
    raw = error_body(None, error)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    head += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})


async def _json(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    raw = orjson.dumps(body)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    head += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})


async def serve_stdio(gateway: Gateway, store: str | None) -> None:
    """MCP over this process's stdin/stdout (the local caller, as A2M's stdio)."""
    tools = McpTools(gateway, gateway.config.server.mcp)
    server = build_server(tools, Endpoint(store))
    options = server.create_initialization_options()
    async with stdio_server() as (read, write):
        # Every request read is answered before the session ends; garbage gets an error.
        await answered_to_the_end(read, write, lambda r, w: server.run(r, w, options))
