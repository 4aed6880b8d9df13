"""The SDK's stdio client launching `a2m-gateway mcp`, on every backend, both revisions.

One session per (backend, revision) runs the whole script — list, each tool,
bad arguments — because each session is a fresh process (the demo indexes its
corpus at start). Ground truth is the backend's A2M HTTP server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conformance.conftest import HttpClient, StoreBackend, gateway_command, gateway_env
from tests.mcp.support import (
    MODES,
    TOOLS,
    error_text,
    mcp_stdio,
    stdio_params,
    structured,
    text,
    tools_by_name,
)
from tests.mcp.test_http import BAD_CALLS, QUERY, negotiated

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", MODES)
async def test_a_whole_session_over_stdio(
    tmp_path_factory: pytest.TempPathFactory,
    backend: StoreBackend,
    http_client: HttpClient,
    mode: str,
) -> None:
    recall = http_client.call("memory/recall", {"query": QUERY, "limit": 3})["records"]
    newest = http_client.call("memory/timeline", {"limit": 2})["records"]
    params = stdio_params(tmp_path_factory.mktemp(f"mcp-stdio-{backend.name}"), backend.config_args)
    async with mcp_stdio(params, mode) as client:
        assert client.protocol_version == negotiated(mode)
        tools = tools_by_name((await client.list_tools()).tools)
        assert set(tools) == TOOLS
        assert all(t.annotations and t.annotations.read_only_hint for t in tools.values())
        found = await client.call_tool("search", {"query": QUERY, "limit": 3})
        listing = structured(found, tools["search"])
        doc = structured(
            await client.call_tool("fetch", {"id": listing["results"][0]["id"]}), tools["fetch"]
        )
        timeline = structured(await client.call_tool("timeline", {"limit": 2}), tools["timeline"])
        errors = [error_text(await client.call_tool(name, args)) for name, args in BAD_CALLS]
    assert [r["id"] for r in listing["results"]] == [f"demo:{r['id']}" for r in recall]
    assert text(found).startswith("[1] ")
    assert doc["text"] == recall[0]["content"]
    assert [r["id"] for r in timeline["results"]] == [f"demo:{r['id']}" for r in newest]
    assert all(errors)


async def test_one_store_over_stdio(
    tmp_path_factory: pytest.TempPathFactory, backend: StoreBackend, http_client: HttpClient
) -> None:
    recall = http_client.call("memory/recall", {"query": QUERY, "limit": 2})["records"]
    params = stdio_params(
        tmp_path_factory.mktemp(f"mcp-stdio1-{backend.name}"),
        backend.config_args,
        "--store",
        "demo",
    )
    async with mcp_stdio(params, "2026-07-28") as client:
        tools = tools_by_name((await client.list_tools()).tools)
        assert "store" not in tools["search"].input_schema["properties"]
        listing = structured(
            await client.call_tool("search", {"query": QUERY, "limit": 2}), tools["search"]
        )
    assert [r["id"] for r in listing["results"]] == [r["id"] for r in recall]


def test_an_unknown_store_is_refused_at_start(tmp_path: Path) -> None:
    cmd = [*gateway_command(), "mcp", "--store", "nope"]
    done = subprocess.run(
        cmd, env=gateway_env(tmp_path), capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert b"no store named 'nope'" in done.stderr
    assert done.stdout == b""
