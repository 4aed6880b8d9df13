"""The SDK's stdio client launching `a2m-gateway mcp`, on every backend, both revisions.

One session per (backend, revision) runs the whole script — list, each tool,
bad arguments — because each session is a fresh process (the demo indexes its
corpus at start). Ground truth is the backend's A2M HTTP server.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
import yaml

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
from tests.support.qdrant_pair import write_qdrant_pair

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


async def test_a_federation_over_stdio(tmp_path: Path) -> None:
    """`a2m-gateway mcp --store <federation>`: the federation's records, ids routed back.

    A third member points at a port nobody listens on: the answers carry the
    others' records and name it in `left_out`.
    """
    stores = write_qdrant_pair(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    stores["gone"] = {
        "backend": "opensearch",
        "index": "gone",
        "connection": {"hosts": [f"http://127.0.0.1:{dead}"], "retries": 0, "timeout_ms": 2000},
        "mapping": {"content": "text", "key": "key"},
        "search": {"mode": "lexical", "text_fields": ["text"]},
    }
    config = tmp_path / "gateway.yaml"
    config.write_text(
        yaml.safe_dump(
            {"stores": stores, "federations": {"both": {"members": ["left", "right", "gone"]}}}
        )
    )
    params = stdio_params(tmp_path / "data", ["--config", str(config)], "--store", "both")
    async with mcp_stdio(params, "2026-07-28") as client:
        tools = tools_by_name((await client.list_tools()).tools)
        searched = await client.call_tool("search", {"query": "harbour cranes", "limit": 6})
        found = structured(searched, tools["search"])
        text_of_search = text(searched)
        right = next(r for r in found["results"] if r["id"].startswith("right:"))
        doc = structured(await client.call_tool("fetch", {"id": right["id"]}), tools["fetch"])
        keyed = structured(await client.call_tool("fetch", {"id": "left/0"}), tools["fetch"])
        newest = structured(await client.call_tool("timeline", {"limit": 4}), tools["timeline"])
    assert "store" not in tools["search"].input_schema["properties"]
    assert {r["id"].split(":")[0] for r in found["results"]} == {"left", "right"}
    assert len(found["results"]) == 6
    assert doc["id"] == right["id"]
    assert doc["text"].startswith("right note")
    assert (keyed["id"], keyed["key"]) == ("left:1", "left/0")
    assert [r["id"] for r in newest["results"]] == ["left:2", "right:2", "left:3", "right:3"]
    for listing in (found, newest):
        assert listing["left_out"] == [{"member": "gone", "reason": "engine_unavailable"}]
    assert "members left out of this answer: gone (engine_unavailable)" in text_of_search
