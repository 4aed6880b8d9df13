"""The audit line names the client where it says so: MCP clientInfo, X-Client-Name, User-Agent.

The name is sanitised and bounded (a unit test of the rule), and end to end a real
`a2m-gateway serve` of the lexical demo audits an A2M call by its headers and an
MCP call from the official SDK client by its clientInfo, over both MCP revisions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.observability.client_name import MAX_CLIENT_NAME, client_name, mcp_client
from tests.conformance.conftest import HttpServer, start_http_server
from tests.mcp.support import mcp_http

DEMO = Path(__file__).resolve().parents[2] / "config" / "demo.yaml"


def test_the_name_is_printable_and_bounded() -> None:
    assert client_name(None, "  ", "curl/8.5.0") == "curl/8.5.0"
    assert client_name("agent\n2026-01-01 INFO forged line") == "agent?2026-01-01 INFO forged line"
    assert client_name('x" "principal":"root') == "x? ?principal?:?root"
    assert len(client_name("a" * 1000) or "") == MAX_CLIENT_NAME
    assert client_name(None, None) is None
    assert mcp_client({"name": "claude-code", "version": "2.1"}) == "claude-code/2.1"
    assert mcp_client({"name": ""}) is None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    started = start_http_server(tmp_path_factory.mktemp("client-name"), DEMO)
    try:
        yield started
    finally:
        started.stop()


def _audited(server: HttpServer) -> list[dict[str, object]]:
    lines = server.stderr_path.read_text().splitlines()
    calls = []
    for line in lines:
        if " a2m.audit call " in line:
            fields = dict(
                part.split("=", 1) for part in line.split(" a2m.audit call ", 1)[1].split()
            )
            calls.append(fields)
    return calls  # type: ignore[return-value]


def _rpc(rid: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": rid, "method": "memory/describe", "params": {}}


def test_an_a2m_call_is_audited_by_its_headers(server: HttpServer) -> None:
    url = f"{server.base_url}/a2m/demo"
    httpx.post(url, json=_rpc(1), headers={"X-Client-Name": "nightly-eval", "User-Agent": "ua/1"})
    httpx.post(url, json=_rpc(2), headers={"User-Agent": "notes-bot/0.3"})
    httpx.post(url, json=_rpc(3), headers={"User-Agent": ""})
    clients = [c.get("client") for c in _audited(server)[-3:]]
    assert clients == ["nightly-eval", "notes-bot/0.3", None]


async def test_an_mcp_call_is_audited_by_its_client_info(server: HttpServer) -> None:
    info = types.Implementation(name="eval-harness", version="1.2")
    async with httpx2.AsyncClient(timeout=60) as http:
        transport = streamable_http_client(f"{server.base_url}/mcp/demo", http_client=http)
        async with Client(transport, mode="2026-07-28", client_info=info) as client:
            found = await client.call_tool("search", {"query": "read-only", "limit": 1})
            assert not found.is_error
    last = _audited(server)[-1]
    assert last["method"] == "memory/recall"
    assert last["client"] == "eval-harness/1.2"  # clientInfo wins over the User-Agent


async def test_legacy_mcp_over_stateless_http_is_named_by_its_user_agent(
    server: HttpServer,
) -> None:
    # Each legacy POST is its own session here: the initialize that carried clientInfo is
    # gone by the tools/call, so the HTTP headers name the client.
    async with mcp_http(f"{server.base_url}/mcp/demo", "legacy") as client:
        await client.call_tool("search", {"query": "read-only", "limit": 1})
    assert str(_audited(server)[-1]["client"]).startswith("python-httpx")


def test_mcp_stdio_is_audited_by_the_initialize_client_info() -> None:
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "desk-agent", "version": "0.9"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "read-only", "limit": 1}},
        },
    ]
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "mcp", "--config", str(DEMO)],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    audit = [ln for ln in done.stderr.splitlines() if " a2m.audit call " in ln]
    assert len(audit) == 1, done.stderr
    assert "client=desk-agent/0.9" in audit[0]
