"""`GET /`: a small page naming the endpoints and docs, JSON for scripts and HTML for a browser;
store names only where the discovery document is open too."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from gateway.config import GatewayConfig
from gateway.demo import default_demo_config
from gateway.runtime import Gateway
from tests.support.asgi import asgi_client

README = Path(__file__).resolve().parents[2] / "README.md"
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def _client(cfg: GatewayConfig) -> httpx.AsyncClient:
    # No lifespan: the page is built from the config, no store needs to be open.
    return asgi_client(Gateway(cfg))


def _with_auth(cfg: GatewayConfig) -> GatewayConfig:
    digest = hashlib.sha256(b"k" * 40).hexdigest()
    dumped = cfg.model_dump(mode="json", exclude_none=True)
    dumped["server"]["auth"] = {"api_keys": [{"subject": "s", "hash": f"sha256:{digest}"}]}
    return GatewayConfig.model_validate(dumped)


async def test_root_is_json_naming_endpoints_docs_and_stores() -> None:
    async with _client(default_demo_config()) as http:
        reply = await http.get("/")
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    page = reply.json()
    assert page["protocol"] == "a2m/0.1"
    assert "POST /a2m/{store}" in page["endpoints"]
    assert "GET /.well-known/a2m-server.json" in page["endpoints"]
    assert page["docs"]["readme"] == "README.md"
    assert page["stores"] == {"demo": "/a2m/demo"}


@pytest.mark.parametrize("accept", ["*/*", "application/json", "application/json, text/html"])
async def test_scripts_get_json(accept: str) -> None:
    async with _client(default_demo_config()) as http:
        reply = await http.get("/", headers={"Accept": accept})
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"


async def test_a_browser_gets_html() -> None:
    # With the try page on, a browser gets that page instead (tests/gateway/test_try_page.py).
    dumped = default_demo_config().model_dump(mode="json", exclude_none=True)
    dumped["server"]["try_page"] = False
    async with _client(GatewayConfig.model_validate(dumped)) as http:
        reply = await http.get("/", headers={"Accept": BROWSER_ACCEPT})
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/html")
    assert "<code>POST /a2m/{store}</code>" in reply.text
    assert "<code>POST /a2m/demo</code>" in reply.text


async def test_with_auth_on_the_page_is_open_but_names_no_store() -> None:
    async with _client(_with_auth(default_demo_config())) as http:
        page = await http.get("/")
        discovery = await http.get("/.well-known/a2m-server.json")
    assert page.status_code == 200
    assert "stores" not in page.json()
    assert "demo" not in page.text
    assert discovery.status_code == 401  # the control: store names stay behind auth


async def test_the_mcp_door_is_listed_in_json_and_html() -> None:
    dumped = default_demo_config().model_dump(mode="json", exclude_none=True)
    dumped["server"]["try_page"] = False  # the plain listing is what a browser gets then
    async with _client(GatewayConfig.model_validate(dumped)) as http:
        page = (await http.get("/")).json()
        html = (await http.get("/", headers={"Accept": BROWSER_ACCEPT})).text
    assert {"POST /mcp", "POST /mcp/{store}"} <= set(page["endpoints"])
    assert "<code>POST /mcp</code>" in html
    assert "<code>POST /mcp/{store}</code>" in html


async def test_with_mcp_off_the_mcp_door_is_not_listed() -> None:
    dumped = default_demo_config().model_dump(mode="json", exclude_none=True)
    dumped["server"]["mcp"] = {"enabled": False}
    async with _client(GatewayConfig.model_validate(dumped)) as http:
        page = (await http.get("/")).json()
        mcp = await http.post("/mcp", json={})
    assert not any("/mcp" in endpoint for endpoint in page["endpoints"])
    assert mcp.status_code in (404, 405)  # the control: the door really is closed


async def test_the_docs_this_install_carries_are_served_and_linked() -> None:
    readme = README.read_bytes()
    async with _client(default_demo_config()) as http:
        page = (await http.get("/")).json()
        served = await http.get("/docs/readme")
        draft = await http.get("/docs/spec")
        unknown = await http.get("/docs/..%2Fpyproject.toml")
    no_try = default_demo_config().model_dump(mode="json", exclude_none=True)
    no_try.setdefault("server", {})["try_page"] = False
    async with _client(GatewayConfig.model_validate(no_try)) as http:
        html = (await http.get("/", headers={"accept": "text/html"})).text
    assert page["doc_links"]["readme"] == "/docs/readme"
    assert page["doc_links"]["spec"].startswith("https://")
    assert served.status_code == 200
    assert served.headers["content-type"] == "text/markdown; charset=utf-8"
    assert served.content == readme
    assert draft.status_code == 404  # an address, not a file this server holds
    assert unknown.status_code == 404  # only the named docs, never a path
    assert "<a href='/docs/protocol'>docs/protocol.md</a>" in html
