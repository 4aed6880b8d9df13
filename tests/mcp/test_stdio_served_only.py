"""`a2m-gateway mcp --store X` opens only X: a store at another port is never connected."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.test_served_only import two_stores
from tests.mcp.support import mcp_stdio, stdio_params, structured, tools_by_name
from tests.support.listener import recording_listener

pytestmark = pytest.mark.integration


async def test_mcp_stdio_with_a_store_never_connects_to_another(tmp_path: Path) -> None:
    with recording_listener() as dead:
        cfg = two_stores(tmp_path, dead.url)
        params = stdio_params(tmp_path / "data", ["--config", str(cfg)], "--store", "a")
        async with mcp_stdio(params, "2026-07-28") as client:
            tools = tools_by_name((await client.list_tools()).tools)
            found = structured(
                await client.call_tool("search", {"query": "cranes", "limit": 3}), tools["search"]
            )
        assert len(found["results"]) == 1  # the one document of store a
        assert dead.connections == []


async def test_mcp_stdio_serving_every_store_does_connect(tmp_path: Path) -> None:
    """The control: the listener does see a gateway that opens every store."""
    with recording_listener() as dead:
        cfg = two_stores(tmp_path, dead.url)
        params = stdio_params(tmp_path / "data", ["--config", str(cfg)])
        async with mcp_stdio(params, "2026-07-28") as client:
            await client.list_tools()
        assert dead.connections != []
