"""MCP clients of the official SDK, over a real gateway's Streamable HTTP and stdio.

Both revisions are driven: ``legacy`` is the 2025-11-25 initialize handshake,
``2026-07-28`` the stateless per-request envelope (``server/discover`` era).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Tool

from tests.conformance.conftest import CALL_TIMEOUT_S, gateway_command, gateway_env

MODES = ["legacy", "2026-07-28"]
"""Client modes: the 2025-11-25 handshake, and the current stateless revision."""
TOOLS = {"search", "fetch", "timeline"}


@asynccontextmanager
async def mcp_http(
    url: str, mode: str, headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """The SDK client on `url` (Streamable HTTP), optionally with extra headers (a bearer)."""
    async with httpx2.AsyncClient(headers=headers or {}, timeout=CALL_TIMEOUT_S) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=CALL_TIMEOUT_S) as client:
            yield client


def stdio_params(data_dir: Path, config_args: list[str], *extra: str) -> StdioServerParameters:
    """`a2m-gateway mcp` as the SDK's stdio client launches it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = gateway_command()
    return StdioServerParameters(
        command=cmd[0],
        args=[*cmd[1:], "mcp", *config_args, *extra],
        env=gateway_env(data_dir),
    )


@asynccontextmanager
async def mcp_stdio(params: StdioServerParameters, mode: str) -> AsyncIterator[Client]:
    # The first start may index the demo corpus: the handshake gets the start-up allowance.
    async with Client(params, mode=mode, read_timeout_seconds=240) as client:
        yield client


def tools_by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


def structured(result: CallToolResult, tool: Tool) -> dict[str, Any]:
    """The structured content of a successful call, checked against the declared schema."""
    assert not result.is_error, result.content
    assert tool.output_schema is not None
    data = result.structured_content
    assert isinstance(data, dict), data
    Draft202012Validator.check_schema(tool.output_schema)
    errors = list(Draft202012Validator(tool.output_schema).iter_errors(data))
    assert errors == [], errors[:3]
    return data


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


def error_text(result: CallToolResult) -> str:
    """The message of an isError result, which must carry no traceback or structured content."""
    assert result.is_error, result
    assert result.structured_content is None
    message = text(result)
    assert "Traceback" not in message, message
    assert 'File "' not in message, message
    return message
