"""MCP over stdio, line by line as the A2M stdio door: every request answered, garbage refused.

The SDK's stdio transport ends the session the moment stdin closes, so a request
piped in (``echo '<request>' | a2m-gateway mcp``) is answered ``Connection
closed`` instead of its result, and a line that is not JSON-RPC is dropped
without a word. :func:`answered_to_the_end` sits between that transport and the
server: it holds the server's input open after end of input until every
request read has been answered, and answers a line that is not JSON with a
parse error (-32700) and JSON that is no JSON-RPC message with -32600 (id null,
as JSON-RPC 2.0 says), where the server itself would say nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

Serve = Callable[
    [MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]],
    Awaitable[None],
]

PARSE_ERROR_MESSAGE = "Parse error: the line is not valid JSON"
INVALID_REQUEST_MESSAGE = "Invalid request: the line is not a JSON-RPC 2.0 message"


def refusal(exc: Exception) -> SessionMessage:
    """The error answer to a line the transport could not read as a JSON-RPC message."""
    not_json = isinstance(exc, ValidationError) and any(
        e["type"] == "json_invalid" for e in exc.errors(include_url=False, include_input=False)
    )
    error = (
        types.ErrorData(code=types.PARSE_ERROR, message=PARSE_ERROR_MESSAGE)
        if not_json
        else types.ErrorData(code=types.INVALID_REQUEST, message=INVALID_REQUEST_MESSAGE)
    )
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


class _Pending:
    """The ids of the requests read and not yet answered."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self.drained = anyio.Event()

    def read(self, message: SessionMessage) -> None:
        if isinstance(message.message, types.JSONRPCRequest):
            self.ids.add(message.message.id)

    def answered(self, message: SessionMessage) -> None:
        if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
            self.ids.discard(message.message.id)
        if not self.ids:
            self.drained.set()
            self.drained = anyio.Event()

    async def wait_drained(self) -> None:
        if self.ids:
            await self.drained.wait()


async def answered_to_the_end(
    read: Any,
    write: Any,
    serve: Serve,
) -> None:
    """Run `serve` on streams fed from the transport's `read`, answering into its `write`.

    `read` and `write` are the SDK stdio transport's streams; `serve` runs the MCP
    server on the two streams it is given and returns when its input ends.
    """
    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    pending = _Pending()

    async def inbound() -> None:
        async with to_server:
            async for item in read:
                if isinstance(item, Exception):
                    await write.send(refusal(item))
                    continue
                pending.read(item)
                await to_server.send(item)
            await pending.wait_drained()  # end of input: answer what was asked first

    async def outbound() -> None:
        async with from_server, write:  # the transport's output ends with the server's
            async for message in from_server:
                await write.send(message)
                pending.answered(message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(inbound)
        tg.start_soon(outbound)
        async with server_out:
            await serve(server_in, server_out)
