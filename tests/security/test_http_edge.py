"""The HTTP edge before JSON-RPC, on a real uvicorn socket where it matters.

Header deadline, keep-alive, connection cap, the in-flight body budget, the rate
limit charged before the body, failed authentication limited per client
address, the Host check, no redirects, X-Forwarded-For trust, the security
headers and duplicate Authorization headers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from gateway.a2m.errors import ErrorCode
from gateway.config import parse_config
from gateway.observability.metrics import Metrics
from gateway.transports.http import create_app
from gateway.transports.uvicorn_config import uvicorn_options
from tests.security.edge_support import (
    DEADLINE_S,
    PROTOCOLS,
    audit_records,
    closed_by_server,
    post_head,
    read_response,
    served,
    wait_until,
)
from tests.security.support import (
    BOB_KEY,
    Issuer,
    MemoryConnector,
    acl_docs,
    asgi_client,
    auth_section,
    bearer,
    build_gateway,
    memory_store_config,
    rpc,
)
from tests.support.asgi import app_client

# -- item 3: header time, keep-alive, connections, body bytes, rate limit before the body ---------


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_trickled_header_and_an_idle_socket_are_closed(protocol: str) -> None:
    async with served({"http": {"header_timeout_ms": 300}}, protocol) as (port, _):
        idle_r, idle_w = await asyncio.open_connection("127.0.0.1", port)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"POST /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\n")

        async def trickle() -> None:
            for i in range(1000):
                w.write(f"x-{i}: y\r\n".encode())
                await asyncio.sleep(0.05)

        feeder = asyncio.create_task(trickle())
        try:
            assert await closed_by_server(r) == b""
            assert await closed_by_server(idle_r) == b""
        finally:
            feeder.cancel()
            w.close()
            idle_w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_kept_alive_connection_is_closed_when_idle(protocol: str) -> None:
    async with served({"http": {"keep_alive_s": 0.2, "header_timeout_ms": 60_000}}, protocol) as (
        port,
        _,
    ):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(rpc("memory/describe", {})).encode()
        w.write(post_head(len(body)) + body)
        answer = await closed_by_server(r)
        assert answer.startswith(b"HTTP/1.1 200")
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_header_deadline_is_rearmed_after_each_response(protocol: str) -> None:
    async with served({"http": {"header_timeout_ms": 300}}, protocol) as (port, _):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(rpc("memory/describe", {})).encode()
        w.write(post_head(len(body)) + body)
        head, _ = await read_response(r)
        assert head.startswith(b"HTTP/1.1 200")
        w.write(b"POST /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the next head, never ended
        assert await closed_by_server(r) == b""
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_head_over_max_header_bytes_is_refused(protocol: str) -> None:
    async with served({"http": {"max_header_bytes": 2048}}, protocol) as (port, _):
        # Under the limit, then a body 50 times its size in reads of its own (sent once the
        # server asks for it with 100 Continue): only heads count.
        body = json.dumps(rpc("memory/describe", {"pad": "a" * 100_000})).encode()
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(post_head(len(body), f"expect: 100-continue\r\nx-pad: {'a' * 1500}\r\n"))
        async with asyncio.timeout(DEADLINE_S):
            assert await r.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        w.write(body)
        head, _ = await read_response(r)
        assert head.startswith(b"HTTP/1.1 200")
        w.close()
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(post_head(0)[:-2])  # a head without its blank line, then 8 KB more of it
        for _ in range(8):
            w.write(f"x-pad: {'a' * 1000}\r\n".encode())
            await w.drain()
        answer = await closed_by_server(r)
        assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_pipelined_requests_are_answered_in_order(protocol: str) -> None:
    async with served({}, protocol) as (port, _):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        calls = [json.dumps(rpc("memory/describe", {}, rid)).encode() for rid in (7, 8)]
        w.write(b"".join(post_head(len(c)) + c for c in calls))
        assert [(await read_response(r))[1]["id"] for _ in calls] == [7, 8]
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_websocket_upgrade_is_answered_as_plain_http(protocol: str) -> None:
    # No door speaks WebSocket: the handshake is one more GET, which the MCP door refuses.
    async with served({}, protocol) as (port, _):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n"
        )
        head, body = await read_response(r)
        assert head.startswith(b"HTTP/1.1 405")
        assert body["error"]["message"] == "method not allowed"
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_connections_beyond_the_cap_are_answered_503(protocol: str) -> None:
    async with served({"http": {"max_connections": 3, "header_timeout_ms": 60_000}}, protocol) as (
        port,
        _,
    ):
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(rpc("memory/describe", {})).encode()
        w.write(post_head(len(body)) + body)
        async with asyncio.timeout(DEADLINE_S):
            status = await r.readline()
        assert status.startswith(b"HTTP/1.1 503"), status
        for _, writer in [*held, (r, w)]:
            writer.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_stalled_uploads_cannot_buffer_more_than_the_budget(protocol: str) -> None:
    server = {"max_body_bytes": 1000, "http": {"max_inflight_body_bytes": 2000}}
    async with served(server, protocol) as (port, app):
        stalled = []
        for _ in range(2):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(post_head(1000) + b"[" * 900)  # 900 of 1000 bytes, then nothing
            stalled.append((r, w))
        await wait_until(lambda: app.state.body_budget.used == 1800)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(post_head(1000) + b"[" * 900)
        async with asyncio.timeout(DEADLINE_S):
            status = await r.readline()
        assert status.startswith(b"HTTP/1.1 503"), status
        w.close()
        for _, writer in stalled:
            writer.close()
        await wait_until(lambda: app.state.body_budget.used == 0)  # released on disconnect


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_rate_limit_is_charged_before_the_body_is_read(
    issuer: Issuer, protocol: str
) -> None:
    server = {
        "auth": auth_section(issuer),
        "rate_limit": {"requests_per_second": 0.001, "burst": 1},
    }
    async with served(server, protocol) as (port, _):
        auth = f"authorization: Bearer {BOB_KEY}\r\n"
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(rpc("memory/describe", {})).encode()
        w.write(post_head(len(body), auth) + body)
        async with asyncio.timeout(DEADLINE_S):
            assert (await r.readline()).startswith(b"HTTP/1.1 200")
        w.close()
        # The bucket is empty: a 1 MB upload is refused from its headers, body never sent.
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(post_head(1_000_000, auth))
        async with asyncio.timeout(DEADLINE_S):
            head = await r.readuntil(b"\r\n\r\n")
            length = int(
                next(h for h in head.split(b"\r\n") if h.startswith(b"content-length"))[15:]
            )
            answer = json.loads(await r.readexactly(length))
        assert head.startswith(b"HTTP/1.1 200")
        assert answer["error"]["code"] == ErrorCode.QUOTA_EXCEEDED
        assert answer["id"] is None
        w.close()


def test_http_limits_have_safe_defaults_and_reach_uvicorn() -> None:
    server = parse_config({"stores": {"docs": memory_store_config()}}).server
    options = uvicorn_options(server)
    assert options["timeout_keep_alive"] == 5.0
    assert options["limit_concurrency"] == 1000
    assert options["http"].max_header_bytes == 16_384
    # h11's own limit is only a backstop past the guard's (which answers 431 first).
    assert options["h11_max_incomplete_event_size"] > 16_384 + 256 * 1024
    assert options["http"].header_timeout_s == 10.0
    assert options["proxy_headers"] is False
    with pytest.raises(Exception, match="max_inflight_body_bytes"):
        parse_config(
            {
                "server": {"max_body_bytes": 10_000, "http": {"max_inflight_body_bytes": 10}},
                "stores": {"docs": memory_store_config()},
            }
        )


# -- item 7: the rate-limit key, and failed authentication per client address ---------------------


async def _status(client: httpx.AsyncClient, headers: Any, path: str = "/a2m/docs") -> int:
    r = await client.post(
        path,
        content=json.dumps(rpc("memory/describe", {})),
        headers=[("content-type", "application/json"), *headers],
    )
    return r.status_code


async def test_failed_authentication_is_limited_per_client_address(issuer: Issuer) -> None:
    server = {"auth": {**auth_section(issuer), "failures": {"burst": 5, "per_second": 0.001}}}
    gateway = build_gateway(
        server, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )
    app = create_app(gateway, gateway.config.server, Metrics())

    def client_at(address: str) -> httpx.AsyncClient:
        return app_client(app, peer=(address, 40000))

    with audit_records() as lines:
        async with client_at("10.0.0.1") as attacker, client_at("10.0.0.2") as other:
            bad = [("authorization", "Bearer a2m_not-a-real-key-000000000000000000")]
            statuses = [await _status(attacker, bad) for _ in range(200)]
            assert statuses.count(401) == 5
            assert statuses.count(429) == 195
            # Valid credentials from the same address still pass; others are not limited.
            assert await _status(attacker, bearer(BOB_KEY).items()) == 200
            assert await _status(other, bad) == 401
    failed = [r for r in lines if r.getMessage() == "auth_failed"]
    assert len(failed) == 6  # five from the attacker, one from the other address


async def test_the_rate_limit_key_is_the_exact_subject(issuer: Issuer) -> None:
    server = {
        "auth": auth_section(issuer),
        "rate_limit": {"requests_per_second": 0.001, "burst": 1},
    }
    gateway = build_gateway(
        server, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )

    async def limited(client: httpx.AsyncClient, headers: dict[str, str]) -> bool:
        r = await client.post(
            "/a2m/docs",
            content=json.dumps(rpc("memory/describe", {})),
            headers={"content-type": "application/json", **headers},
        )
        return "error" in r.json()

    async with asgi_client(gateway) as client:
        # Subjects that differ only in non-printable characters are two principals.
        assert not await limited(client, bearer(issuer.token("eve\x01")))
        assert not await limited(client, bearer(issuer.token("eve\x02")))
        assert await limited(client, bearer(issuer.token("eve\x01")))
        # One subject is one principal, whichever credential proves it.
        assert not await limited(client, bearer(BOB_KEY))
        assert await limited(client, bearer(issuer.token("bob")))
    await gateway.close()


# -- item 8: Host, redirects, X-Forwarded-For, headers, duplicate Authorization ------------------


def _app(server: dict[str, Any], bind_host: str) -> Any:
    gateway = build_gateway(
        server, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )
    return create_app(gateway, gateway.config.server, Metrics(), bind_host=bind_host)


async def _host_status(app: Any, host: str, method: str, path: str) -> int:
    async with app_client(app) as c:
        body = json.dumps(rpc("memory/describe", {})) if method == "POST" else None
        r = await c.request(
            method,
            path,
            content=body,
            headers={"host": host, "content-type": "application/json"},
        )
        return r.status_code


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/a2m/docs"), ("GET", "/.well-known/a2m-server.json"), ("GET", "/healthz")],
)
async def test_a_loopback_gateway_serves_only_loopback_host_names(method: str, path: str) -> None:
    app = _app({}, "127.0.0.1")
    for host in ("localhost", "localhost:8080", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST."):
        assert await _host_status(app, host, method, path) == 200, host
    # A DNS-rebinding page reaches 127.0.0.1 under its own name.
    for host in ("rebind.attacker.example", "rebind.attacker.example:8080", "127.0.0.1.nip.io"):
        assert await _host_status(app, host, method, path) == 421, host


async def test_allowed_hosts_are_configurable() -> None:
    app = _app({"allowed_hosts": ["gw.example.com", "*.corp.example"]}, "127.0.0.1")
    assert await _host_status(app, "gw.example.com", "POST", "/a2m/docs") == 200
    assert await _host_status(app, "a2m.corp.example:443", "POST", "/a2m/docs") == 200
    assert await _host_status(app, "localhost", "POST", "/a2m/docs") == 421
    assert await _host_status(app, "corp.example.evil", "POST", "/a2m/docs") == 421
    # A non-loopback bind with no names configured cannot know them: any Host.
    assert await _host_status(_app({}, "0.0.0.0"), "anything", "POST", "/a2m/docs") == 200


async def test_post_is_never_redirected(issuer: Issuer) -> None:
    app = _app({"auth": auth_section(issuer)}, "127.0.0.1")
    async with app_client(app) as c:
        for path in ("/a2m/docs/", "/a2m/", "/a2m/docs//"):
            r = await c.post(path, content=b"{}", headers={"content-type": "application/json"})
            assert not 300 <= r.status_code < 400, (path, r.status_code)
            assert "location" not in r.headers


async def test_api_responses_say_nosniff_and_no_store(issuer: Issuer) -> None:
    app = _app({"auth": auth_section(issuer)}, "127.0.0.1")
    async with app_client(app) as c:
        json_headers = {"content-type": "application/json"}
        responses = [
            await c.post(
                "/a2m/docs",
                content=json.dumps(rpc("memory/describe")),
                headers={**json_headers, **bearer(BOB_KEY)},
            ),
            await c.post("/a2m/docs", content=b"{}", headers=json_headers),  # 401
            await c.get("/.well-known/a2m-server.json", headers=bearer(BOB_KEY)),
            await c.post("/a2m/nope", content=b"{}", headers={**json_headers, **bearer(BOB_KEY)}),
            await c.get("/healthz"),
        ]
        for r in responses:
            assert r.headers["x-content-type-options"] == "nosniff", r.status_code
            assert r.headers["cache-control"] == "no-store", r.status_code


async def test_duplicate_authorization_headers_are_refused(issuer: Issuer) -> None:
    app = _app({"auth": auth_section(issuer)}, "127.0.0.1")
    async with app_client(app) as c:
        twice = [("authorization", f"Bearer {BOB_KEY}"), ("authorization", "Bearer other")]
        assert await _status(c, twice) == 400
        assert await _status(c, twice[:1]) == 200


@pytest.mark.parametrize("trusted", [[], ["127.0.0.1"]])
async def test_x_forwarded_for_is_believed_only_from_trusted_proxies(
    issuer: Issuer, trusted: list[str]
) -> None:
    server = {"auth": auth_section(issuer), "trusted_proxies": trusted}
    with audit_records() as lines:
        async with served(server) as (port, _), httpx.AsyncClient() as c:
            r = await c.post(
                f"http://127.0.0.1:{port}/a2m/docs",
                content=b"{}",
                headers={"content-type": "application/json", "x-forwarded-for": "10.9.9.9"},
            )
            assert r.status_code == 401
    clients = [getattr(r, "client", None) for r in lines if r.getMessage() == "auth_failed"]
    assert clients == (["10.9.9.9"] if trusted else ["127.0.0.1"])
