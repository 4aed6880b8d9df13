"""The edge's refusals on a real uvicorn socket, on both parsers: what a refused
request's connection costs, what chunked trailers can do, and a head too large
however it arrives.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.security.edge_support import (
    PROTOCOLS,
    audit_records,
    closed_by_server,
    post_head,
    read_response,
    served,
)
from tests.security.support import BOB_KEY, Issuer, auth_section, rpc

# Every timer that could close a connection on its own is far beyond the tests' wait
# (DEADLINE_S): what closes the connection is the refusal itself.
PATIENT = {"header_timeout_ms": 120_000, "keep_alive_s": 120.0}

REFUSALS = {
    # name: (request head without its Content-Length, the refusal's status)
    "404": (
        b"POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n",
        404,
    ),
    "405": (
        b"PUT /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n",
        405,
    ),
    "401": (
        b"POST /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n",
        401,
    ),
    "401 mcp": (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n",
        401,
    ),
    "403 origin": (
        b"POST /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\norigin: https://evil.example\r\n"
        b"content-type: application/json\r\n",
        403,
    ),
    "421 host": (
        b"POST /a2m/docs HTTP/1.1\r\nHost: rebind.example\r\ncontent-type: application/json\r\n",
        421,
    ),
}


def header_lines(head: bytes) -> list[bytes]:
    return [line.lower() for line in head.split(b"\r\n")[1:] if line]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("refusal", list(REFUSALS))
async def test_a_refused_request_does_not_keep_its_connection(
    issuer: Issuer, protocol: str, refusal: str
) -> None:
    head, status = REFUSALS[refusal]
    server = {"auth": auth_section(issuer), "http": PATIENT, "body_timeout_ms": 120_000}
    async with served(server, protocol) as (port, _):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(head + b"content-length: 100\r\n\r\n")
        answer, _ = await read_response(r)
        assert answer.startswith(b"HTTP/1.1 %d" % status), answer[:80]
        assert b"connection: close" in header_lines(answer)
        w.write(b"[")  # one byte of the hundred announced, then nothing
        await w.drain()
        assert await closed_by_server(r) == b""  # closed by the server, not by a timer
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_request_read_to_its_end_keeps_its_connection(
    issuer: Issuer, protocol: str
) -> None:
    # The control: an answer after the whole body (a refusal too) leaves the connection open.
    server = {"auth": auth_section(issuer), "http": PATIENT}
    async with served(server, protocol) as (port, _):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        auth = f"authorization: Bearer {BOB_KEY}\r\n"
        bad = b"{"  # read to its end, then refused as JSON
        w.write(post_head(len(bad), auth) + bad)
        answer, reply = await read_response(r)
        assert answer.startswith(b"HTTP/1.1 200")
        assert "error" in reply
        assert b"connection: close" not in header_lines(answer)
        for rid in (1, 2):
            call = json.dumps(rpc("memory/describe", {}, rid)).encode()
            w.write(post_head(len(call), auth) + call)
            answer, reply = await read_response(r)
            assert answer.startswith(b"HTTP/1.1 200")
            assert reply["id"] == rid
            assert b"connection: close" not in header_lines(answer)
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_refused_uploads_cannot_hold_the_connection_cap(
    issuer: Issuer, protocol: str
) -> None:
    cap = 4
    server = {
        "auth": auth_section(issuer),
        "http": {**PATIENT, "max_connections": cap},
        "body_timeout_ms": 120_000,
    }
    async with served(server, protocol) as (port, _):
        held = []
        for _ in range(cap):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(REFUSALS["404"][0] + b"content-length: 100\r\n\r\n")
            answer, _ = await read_response(r)
            assert answer.startswith(b"HTTP/1.1 404")
            w.write(b"[")
            held.append((r, w))
        for r, _ in held:
            assert await closed_by_server(r) == b""
        # Every attacker socket is gone: a caller is served, not answered 503.
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(rpc("memory/describe", {})).encode()
        w.write(post_head(len(body), f"authorization: Bearer {BOB_KEY}\r\n") + body)
        answer, reply = await read_response(r)
        assert answer.startswith(b"HTTP/1.1 200")
        assert "result" in reply
        for _, writer in [*held, (r, w)]:
            writer.close()


def chunked(body: bytes, trailers: str) -> bytes:
    """A chunked POST to /a2m/docs whose trailer section holds `trailers` (CRLF-ended lines)."""
    return (
        b"POST /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(body)
        + body
        + b"\r\n0\r\n"
        + trailers.encode()
        + b"\r\n"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_trailer_is_never_a_header(issuer: Issuer, protocol: str) -> None:
    body = json.dumps(rpc("memory/describe", {})).encode()
    async with served({"auth": auth_section(issuer), "http": PATIENT}, protocol) as (port, _):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        # The control: the same key as a header is accepted, chunked.
        w.write(
            chunked(body, "").replace(
                b"\r\n\r\n", f"\r\nauthorization: Bearer {BOB_KEY}\r\n\r\n".encode(), 1
            )
        )
        answer, reply = await read_response(r)
        assert answer.startswith(b"HTTP/1.1 200")
        assert "result" in reply
        # Whole in one write, so the trailer is parsed before the app reads the headers.
        w.write(chunked(body, f"authorization: Bearer {BOB_KEY}\r\n"))
        answer, reply = await read_response(r)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:80]
        assert "result" not in reply
        w.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_forwarded_for_trailer_is_not_the_client(issuer: Issuer, protocol: str) -> None:
    server: dict[str, Any] = {
        "auth": auth_section(issuer),
        "trusted_proxies": ["127.0.0.1"],
        "http": PATIENT,
    }
    bad = "authorization: Bearer a2m_not-a-real-key-000000000000000000\r\n"
    body = b"{}"
    with audit_records() as lines:
        async with served(server, protocol) as (port, _):
            as_trailer = chunked(body, "x-forwarded-for: 10.9.9.2\r\n")
            for request in (
                # The control: from a trusted proxy, X-Forwarded-For as a header names the client.
                post_head(len(body), bad + "x-forwarded-for: 10.9.9.1\r\n") + body,
                as_trailer.replace(b"\r\n\r\n", f"\r\n{bad}\r\n".encode(), 1),
            ):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(request)  # whole in one write: the trailer is in before the app runs
                assert (await read_response(r))[0].startswith(b"HTTP/1.1 401")
                w.close()
    clients = [getattr(x, "client", None) for x in lines if x.getMessage() == "auth_failed"]
    assert clients == ["10.9.9.1", "127.0.0.1"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shape", ["one large field", "many fields"])
async def test_a_head_over_the_limit_sent_at_once_is_refused_431(protocol: str, shape: str) -> None:
    if shape == "one large field":
        fields = f"x-pad: {'a' * 100_000}\r\n"
    else:
        fields = "".join(f"x-pad-{i}: a\r\n" for i in range(2_000))
    body = json.dumps(rpc("memory/describe", {})).encode()
    bodiless = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{fields}\r\n".encode()
    async with served({"http": PATIENT}, protocol) as (port, _):
        for request in (post_head(len(body), fields) + body, bodiless):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(request)
            answer = await closed_by_server(r)  # with a body to read or none, closed
            assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
            assert b"connection: close" in header_lines(answer.split(b"\r\n\r\n", 1)[0])
            assert answer.endswith(b'{"error":"request header fields too large"}')
            w.close()
        # Under the limit, the same request is served.
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(post_head(len(body), "x-pad: a\r\n") + body)
        answer, reply = await read_response(r)
        assert answer.startswith(b"HTTP/1.1 200")
        assert "result" in reply
        w.close()
