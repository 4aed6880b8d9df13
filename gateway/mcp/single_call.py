"""A 2026-07-28 ``tools/call`` served in one step, with the SDK's own checks and shapes.

A well-formed 2026-07-28 tool call is one POST whose answer depends on nothing
but the call, yet the SDK's single-exchange entry builds a connection, a
session, a context and a middleware chain for it, dumps and re-validates the
result twice and encodes it with the stdlib: about half an MCP call's CPU.
This module answers such a call directly. Every test that can refuse it is the
SDK's own function, run in the SDK's order (Accept, the routing headers, the
envelope ladder, the params surface, the handler's params model); a request
that fails any of them, or carries ``Mcp-Param-*`` headers (the SDK checks
those against the tool's schema), is left to the SDK, which answers it exactly as before,
so every refusal on the wire is still the SDK's. The result is shaped as the
SDK shapes it (the version's result surface, ``resultType``, the ``serverInfo``
stamp) and a handler exception is mapped by the SDK's own ladder.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any

import mcp_types as types
import orjson
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import INTERNAL_ERROR, SERVER_INFO_META_KEY
from mcp_types import methods as surface
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Send

log = logging.getLogger(__name__)

METHOD = "tools/call"
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower()
_PARAM_HEADER_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()
_ACCEPT_VALUES_KEPT = 64


class SingleCall:
    """Answers the tool calls it can answer exactly as the SDK would; declines the rest."""

    def __init__(self, server_info: Mapping[str, Any]) -> None:
        self._server_info = dict(server_info)
        self._shapes: dict[tuple[str, bool], dict[str, Any]] = {}
        self._accept_verdicts: dict[str, bool] = {}

    def accepts(
        self, request: Request, message: Mapping[str, Any]
    ) -> tuple[str, types.CallToolRequestParams] | None:
        """(version, typed params) of a call this serves; None leaves it to the SDK."""
        if message.get("method") != METHOD or "id" not in message:
            return None
        # Starlette's Headers, once: its items() and, as a dict, each name's first value.
        pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]]
        first = dict(reversed(pairs))
        version = first.get(_VERSION_HEADER)
        if version not in MODERN_PROTOCOL_VERSIONS:
            return None
        if not first.get("content-type", "").lower().startswith("application/json"):
            return None
        if not self._accepts_json(first.get("accept", ""), request):
            return None
        if find_duplicated_routing_header(pairs) is not None:
            return None
        if any(name.startswith(_PARAM_HEADER_PREFIX) for name in first):
            return None  # the SDK validates Mcp-Param-* headers against the tool's schema
        try:
            types.JSONRPCRequest.model_validate(message)
        except ValidationError:
            return None
        route = classify_inbound_request(message, headers=first)
        if not isinstance(route, InboundModernRoute) or route.protocol_version != version:
            return None
        params = message.get("params")
        try:
            surface.validate_client_request(METHOD, version, params)
            typed = types.CallToolRequestParams.model_validate(
                {} if params is None else params, by_name=False
            )
        except (ValidationError, KeyError, ValueError):
            return None
        return version, typed

    def _accepts_json(self, accept: str, request: Request) -> bool:
        """The SDK's Accept verdict (JSON acceptable), kept per Accept value: a client
        sends the same one on every call."""
        verdict = self._accept_verdicts.get(accept)
        if verdict is None:
            if len(self._accept_verdicts) >= _ACCEPT_VALUES_KEPT:
                self._accept_verdicts.clear()
            verdict = self._accept_verdicts[accept] = check_accept_headers(request)[0]
        return verdict

    async def serve(
        self,
        version: str,
        request_id: Any,
        result: Awaitable[types.CallToolResult],
        send: Send,
    ) -> None:
        """Await the handler's `result` and send it, or its exception, as the SDK would."""
        try:
            body: dict[str, Any] = {"result": self._shape(version, await result)}
            status = 200
        except Exception as exc:  # the SDK's exception-to-wire ladder
            error = modern_error_data(exc)
            body = {"error": error.model_dump(by_alias=True, mode="json", exclude_none=True)}
            status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
        raw = orjson.dumps({"jsonrpc": "2.0", "id": request_id, **body})
        head = [(b"content-length", str(len(raw)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": raw})

    def _shape(self, version: str, result: types.CallToolResult) -> dict[str, Any]:
        """The result as the SDK's runner puts it on the wire.

        ``structuredContent`` (an object of any JSON values) passes the surface's
        ``dict[str, Any]`` unchanged, so the surface checks and dumps the rest of the
        result and the listing is put back as it is: the SDK's two walks of it would
        each give the same dict back, the tools build it from JSON values only. A
        result of one text block, as every tool answers, is the same again: its
        shape is checked once per version and error flag, and only its text, a
        string the surface keeps as it is, differs from call to call.
        """
        text = _only_text(result)
        if text is None:
            dumped = self._sieved(version, result)
        else:
            key = (version, result.is_error)
            shape = self._shapes.get(key)
            if shape is None:
                blank = [types.TextContent(type="text", text="")]
                empty = types.CallToolResult(content=blank, is_error=result.is_error)
                shape = self._shapes[key] = self._sieved(version, empty)
            dumped = {**shape, "content": [{**shape["content"][0], "text": text}]}
        if result.structured_content is not None:
            dumped["structuredContent"] = result.structured_content
        return dumped

    def _sieved(self, version: str, result: types.CallToolResult) -> dict[str, Any]:
        """The result but its structuredContent through the version's result surface."""
        dumped = result.model_dump(
            by_alias=True, mode="json", exclude_none=True, exclude={"structured_content"}
        )
        try:
            dumped = surface.serialize_server_result(METHOD, version, dumped)
        except ValidationError:
            # A server bug, logged as the SDK logs it; pydantic's text echoes the result.
            log.exception("handler for %r returned an invalid result", METHOD)
            message = "Handler returned an invalid result"
            raise MCPError(code=INTERNAL_ERROR, message=message) from None
        if dumped.get("resultType") is None:
            dumped["resultType"] = "complete"
        meta = dumped.get("_meta")
        if meta is None:
            dumped["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return dumped


_ONLY_TEXT_FIELDS = frozenset({"content", "structured_content", "is_error"})


def _only_text(result: types.CallToolResult) -> str | None:
    """The text of a result that is one plain text block (and structuredContent); else None."""
    if not result.model_fields_set <= _ONLY_TEXT_FIELDS or len(result.content) != 1:
        return None
    block = result.content[0]
    if type(block) is not types.TextContent or not block.model_fields_set <= {"type", "text"}:
        return None
    return block.text
