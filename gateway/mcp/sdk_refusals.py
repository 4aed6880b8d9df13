"""The SDK's refusals of a body as a message, put in the project's words before they leave.

The SDK's Streamable HTTP transport answers a body it cannot parse or validate
as a JSON-RPC message with 400, a null id and, on the 2025-11-25 path, the
library's text: its JSON parser's error ("recursion limit exceeded at line 1
column 300") or pydantic's, which quotes the caller's input and links
pydantic's documentation. The MCP door checks the envelope itself first
(server.McpHttpApp), but the SDK checks more (a JSON-RPC response's ``result``
must be an object; its JSON parser nests less deep than the door's): whatever
the SDK still refuses that way, on either path, leaves with the door's own fixed
messages. Every other SDK answer (a refusal naming the request's id, a 406 or
415) is a fixed text already and passes as it is. What the SDK accepts is
unchanged.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import Message, Send

from gateway.a2m.errors import ErrorCode, InvalidRequest, ParseError
from gateway.a2m.jsonrpc import error_body

NOT_ONE_MESSAGE = "Invalid request: not one JSON-RPC 2.0 message object"
"""The door's refusal of a body that is JSON but not one JSON-RPC 2.0 message."""


def in_own_words(send: Send) -> Send:
    """`send`, with an SDK refusal of the body as a message (400, id null) rewritten to the
    door's fixed error; anything else passes unchanged."""
    held: Message | None = None

    async def send_own(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and message["status"] == 400:
            held = message  # until its body says which refusal it is
            return
        if held is not None:
            start, held = held, None
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                body = _own_body(message.get("body", b""))
                if body is not None:
                    await send(_with_length(start, len(body)))
                    await send({"type": "http.response.body", "body": body})
                    return
            await send(start)
        await send(message)

    return send_own


def _own_body(raw: bytes) -> bytes | None:
    """The door's error body for the SDK's 400 body `raw`; None to keep `raw`."""
    try:
        doc: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    error = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(error, dict) or doc.get("id") is not None:
        return None  # not a refusal of the body as a message
    own = ParseError() if error.get("code") == ErrorCode.PARSE_ERROR else None
    return error_body(None, own or InvalidRequest(NOT_ONE_MESSAGE))


def _with_length(start: Message, length: int) -> Message:
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    return {**start, "headers": [*headers, (b"content-length", str(length).encode())]}
