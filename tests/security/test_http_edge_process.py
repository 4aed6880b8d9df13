"""The edge's refusals on a real `a2m-gateway serve` process (the demo store, API keys, a
trusted proxy), on both parsers: the same checks as test_http_edge_refusals.py and
test_mcp_edge.py make in-process, here through the CLI's own start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.security.edge_support import PROTOCOLS, closed_by_server, read_response
from tests.security.support import BOB_KEY, Issuer, auth_section

pytestmark = pytest.mark.integration

START_S = 120.0
"""Outer bound on the demo's start-up: a hang fails, it is not a speed check."""
TOOLS_LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


@pytest.fixture(params=PROTOCOLS)
def gateway(request: pytest.FixtureRequest, issuer: Issuer, tmp_path: Path) -> Iterator[str]:
    """`serve` on the demo with API keys and 127.0.0.1 as a trusted proxy: its base URL."""
    from gateway.demo import default_demo_config
    from tests.conformance.conftest import free_port, gateway_command, gateway_env

    data_dir = tmp_path / "data"
    doc = default_demo_config(data_dir / "demo").model_dump(mode="json", exclude_none=True)
    doc["server"].update(
        auth={"api_keys": auth_section(issuer)["api_keys"]},
        trusted_proxies=["127.0.0.1"],
        http={"protocol": request.param, "header_timeout_ms": 120_000, "keep_alive_s": 120},
        body_timeout_ms=120_000,
    )
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    port = free_port()
    with (tmp_path / "stderr.log").open("wb") as err:
        proc = subprocess.Popen(
            [*gateway_command(), "serve", "--config", str(cfg), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=gateway_env(data_dir),
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_S
    with httpx.Client(base_url=base, timeout=10) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"serve exited with {proc.returncode}")
            with contextlib.suppress(httpx.TransportError):
                if http.get("/readyz").status_code == 200:
                    return
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)  # paces the poll; returns at once if the process dies
    pytest.fail("serve not ready in time")


async def exchange(base: str, request: bytes) -> tuple[bytes, object]:
    """`request` sent whole on a fresh connection: the response's head and JSON body."""
    port = int(base.rsplit(":", 1)[1])
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(request)
        return await read_response(r)
    finally:
        w.close()


def chunked_recall(head_fields: str, trailers: str) -> bytes:
    body = b'{"jsonrpc":"2.0","id":1,"method":"memory/describe","params":{}}'
    return (
        b"POST /a2m/demo HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        + head_fields.encode()
        + b"transfer-encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(body)
        + body
        + b"\r\n0\r\n"
        + trailers.encode()
        + b"\r\n"
    )


async def test_serve_holds_the_edge(gateway: str) -> None:
    port = int(gateway.rsplit(":", 1)[1])
    # A refused request's connection closes, whatever its unread body does next.
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: 100\r\n\r\n")
    head, _ = await read_response(r)
    assert head.startswith(b"HTTP/1.1 404")
    assert b"connection: close" in head.lower()
    w.write(b"[")
    assert await closed_by_server(r) == b""
    w.close()
    # A key in a trailer is no credential; the same key as a header is.
    auth = f"authorization: Bearer {BOB_KEY}\r\n"
    assert (await exchange(gateway, chunked_recall(auth, "")))[0].startswith(b"HTTP/1.1 200")
    assert (await exchange(gateway, chunked_recall("", auth)))[0].startswith(b"HTTP/1.1 401")
    # A head over max_header_bytes, sent at once.
    big = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nx-pad: " + b"a" * 100_000 + b"\r\n\r\n"
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(big)
    assert (await closed_by_server(r)).startswith(b"HTTP/1.1 431")
    w.close()
    async with httpx.AsyncClient(base_url=gateway, timeout=30) as http:
        # Without a credential, a served store and an unserved name are answered alike.
        prm = "/.well-known/oauth-protected-resource/mcp/"
        served, ghost = (await http.get(prm + "demo")), (await http.get(prm + "ghost"))
        assert served.status_code == ghost.status_code == 200
        assert served.text.replace("demo", "ghost") == ghost.text
        # The MCP door's refusal of a posted response object is its own fixed message.
        r2 = await http.post(
            "/mcp",
            content=b'{"jsonrpc":"2.0","id":1,"result":"echo-marker"}',
            headers={
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "authorization": f"Bearer {BOB_KEY}",
            },
        )
        assert r2.status_code == 400
        assert r2.json()["error"] == {
            "code": -32600,
            "message": "Invalid request: not one JSON-RPC 2.0 message object",
        }
