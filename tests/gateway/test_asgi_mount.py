"""The gateway mounted in a FastAPI application, served by uvicorn on a real socket.

The parent app runs the gateway's lifespan (the stores open and close with it);
under the mount's path the A2M door with API-key authentication, MCP (the
official SDK client), the try page with its assets, and the operator endpoints
all answer, beside the parent's own routes.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.process import GatewayProcess, spawn_until_ready, stop_server
from gateway.security.auth import hash_api_key

pytest.importorskip("fastapi")

REPO = Path(__file__).resolve().parents[2]
KEY = "a2m_mount-test-key-0123456789-abcdefghijklmnopqrstuvwx"
APP = """
from fastapi import FastAPI

from gateway.asgi import create_app

memory = create_app({config!r})
app = FastAPI(lifespan=memory.router.lifespan_context)


@app.get("/hello")
def hello() -> dict[str, str]:
    return {{"hello": "world"}}


app.mount("/memory", memory)
"""


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    tmp = tmp_path_factory.mktemp("mount")
    cfg = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    cfg["server"] = {"auth": {"api_keys": [{"subject": "ops", "hash": hash_api_key(KEY)}]}}
    (tmp / "gateway.yaml").write_text(yaml.safe_dump(cfg))
    (tmp / "parent_app.py").write_text(
        textwrap.dedent(APP.format(config=str(tmp / "gateway.yaml")))
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp), str(REPO)])}
    server = spawn_until_ready(
        lambda port: [
            sys.executable,
            "-m",
            "uvicorn",
            "parent_app:app",
            "--port",
            str(port),
            "--app-dir",
            str(tmp),
        ],
        env,
        tmp / "uvicorn.log",
        health_path="/memory/readyz",
        what="FastAPI app",
    )
    try:
        yield server
    finally:
        stop_server(server.proc)
    log = (tmp / "uvicorn.log").read_text()
    assert "Traceback" not in log, log


def test_the_parent_and_the_gateway_answer_side_by_side(mounted: GatewayProcess) -> None:
    base = mounted.base_url
    assert httpx.get(f"{base}/hello").json() == {"hello": "world"}
    ready = httpx.get(f"{base}/memory/readyz")
    assert ready.status_code == 200  # the lifespan opened the demo store
    assert ready.json()["stores"]["demo"] is True


def test_the_a2m_door_authenticates_under_the_mount(mounted: GatewayProcess) -> None:
    url = f"{mounted.base_url}/memory/a2m/demo"
    call = {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": {"query": "helm"}}
    assert httpx.post(url, json=call).status_code == 401
    reply = httpx.post(url, json=call, headers={"authorization": f"Bearer {KEY}"})
    assert reply.status_code == 200
    assert reply.json()["result"]["records"]


async def test_mcp_under_the_mount_with_the_sdk_client(mounted: GatewayProcess) -> None:
    headers = {"authorization": f"Bearer {KEY}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{mounted.base_url}/memory/mcp/demo", http_client=http)
        async with Client(transport, mode="2026-07-28") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"search", "fetch", "timeline"} <= tools
            found = await client.call_tool("search", {"query": "helm chart", "limit": 2})
            assert not found.is_error


def test_the_try_page_and_its_assets_under_the_mount(mounted: GatewayProcess) -> None:
    base = mounted.base_url
    page = httpx.get(f"{base}/memory/try")
    assert page.status_code == 200
    assert 'src="try/try.js"' in page.text  # relative: resolves under the mount
    script = httpx.get(f"{base}/memory/try/try.js")
    assert script.status_code == 200
    assert "BASE + path" in script.text
    assert httpx.get(f"{base}/memory/try/try.css").status_code == 200


@pytest.mark.integration
def test_the_try_page_works_in_a_browser_under_the_mount(mounted: GatewayProcess) -> None:
    from tests.support.browser import chromium, records, settled, severe_console, shown, text

    with chromium() as driver:
        driver.get(f"{mounted.base_url}/memory/try")
        settled(driver)
        driver.find_element("id", "cred").send_keys(KEY)
        driver.find_element("id", "connect").click()
        settled(driver)
        driver.find_element("id", "query").send_keys("helm chart")
        driver.find_element("id", "run").click()
        settled(driver)
        assert not shown(driver, "error"), text(driver, "error")
        found = records(driver)
        assert found
        assert all(r["uri"].startswith("gateway/demo/corpus/") for r in found)
        # The one refusal is the first discovery, before the key was typed in.
        assert (
            severe_console(
                driver,
                allow=(
                    "/memory/.well-known/a2m-server.json - Failed to load resource: the server "
                    "responded with a status of 401",
                ),
            )
            == []
        )
