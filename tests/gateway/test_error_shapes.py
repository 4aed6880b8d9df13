"""One error shape per door, as each protocol's HTTP binding has it, on a real `serve`.

A2M (§9.3 of the canonical text): a transport-level failure is an HTTP status with
`{"error": message}`; a protocol-level failure, a parse error included, is 200 with a
JSON-RPC error object. MCP (Streamable HTTP): every refusal is an HTTP error status with a
JSON-RPC error response whose id is null, the SDK's own refusals and the gateway's alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.process import GatewayProcess, start_gateway, stop_server

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MCP_ACCEPT = {"accept": "application/json, text/event-stream"}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    tmp = tmp_path_factory.mktemp("shapes")
    proc = start_gateway(REPO / "config" / "demo.yaml", tmp / "data", tmp / "serve.log")
    try:
        yield proc
    finally:
        stop_server(proc.proc)


def _a2m_transport(reply: httpx.Response, status: int) -> str:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert set(body) == {"error"}, body
    message: str = body["error"]
    return message


def _mcp_refusal(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    body = reply.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert set(body) == {"jsonrpc", "id", "error"}, body
    error: dict[str, Any] = body["error"]
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str)
    return error


def test_the_a2m_door_answers_transport_failures_with_one_shape(server: GatewayProcess) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        get = http.get("/a2m")
        assert _a2m_transport(get, 405) == "method not allowed"
        assert "POST" in get.headers["allow"]
        assert _a2m_transport(http.get("/a2m/demo"), 405) == "method not allowed"
        assert _a2m_transport(http.get("/no-such-page"), 404) == "not found"
        _a2m_transport(
            http.post("/a2m", content=b"{}", headers={"content-type": "text/plain"}), 415
        )
        _a2m_transport(http.post("/a2m/nope", content=b"{}", headers=JSON), 404)
        _a2m_transport(
            http.post("/a2m", content=b"{}", headers={**JSON, "origin": "https://evil.example"}),
            403,
        )


def test_the_a2m_door_answers_a_parse_error_as_a_protocol_failure(server: GatewayProcess) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        reply = http.post("/a2m", content=b"{not json", headers=JSON)
    assert reply.status_code == 200  # §9.3: protocol-level failures use 200 OK
    body = reply.json()
    assert body["id"] is None
    assert body["error"]["code"] == -32700


def test_the_mcp_door_answers_every_refusal_with_one_shape(server: GatewayProcess) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        get = http.get("/mcp", headers=MCP_ACCEPT)
        assert _mcp_refusal(get, 405)["code"] == -32600
        assert get.headers["allow"] == "POST"
        _mcp_refusal(http.post("/mcp/nope", content=b"{}", headers={**JSON, **MCP_ACCEPT}), 404)
        text = {"content-type": "text/plain", **MCP_ACCEPT}
        _mcp_refusal(http.post("/mcp", content=b"{}", headers=text), 415)
        parse = http.post("/mcp", content=b"{not json", headers={**JSON, **MCP_ACCEPT})
        assert _mcp_refusal(parse, 400)["code"] == -32700
        batch = http.post("/mcp", content=b"[]", headers={**JSON, **MCP_ACCEPT})
        assert _mcp_refusal(batch, 400)["code"] == -32600
        evil = {**JSON, **MCP_ACCEPT, "origin": "https://evil.example"}
        assert _mcp_refusal(http.post("/mcp", content=b"{}", headers=evil), 403)["message"] == (
            "origin not allowed"
        )
