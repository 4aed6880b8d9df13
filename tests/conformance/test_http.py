"""HTTP binding (§8.3): status codes, Origin, the version header and the well-known profile."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.conformance.conftest import (
    ENVELOPE,
    PROTOCOL,
    HttpClient,
    HttpServer,
    StoreBackend,
    assert_response_object,
    max_body_bytes,
    start_http_server,
)
from tests.support.wire import assert_valid

pytestmark = pytest.mark.integration

ALLOWED = "https://agent.example"
DESCRIBE = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "memory/describe", "params": {}})


@pytest.fixture(scope="module")
def origins_client(
    tmp_path_factory: pytest.TempPathFactory, backend: StoreBackend
) -> Iterator[HttpClient]:
    """A second server of the same store, from a config file that permits one Origin."""
    root = tmp_path_factory.mktemp(f"http-origins-{backend.name}")
    config = backend.write_config(
        root / "gateway.yaml", root / "demo", allowed_origins=[ALLOWED, "http://localhost:3000"]
    )
    server = start_http_server(root, config)
    client = HttpClient(server.base_url)
    yield client
    client.close()
    server.stop()


def post(client: HttpClient, body: bytes = DESCRIBE, **headers: str) -> httpx.Response:
    return client.post(body, headers=headers)


def post_headers(
    client: HttpClient, headers: dict[str, str], body: bytes = DESCRIBE
) -> httpx.Response:
    return client.post(body, headers=headers)


# -- status codes ----------------------------------------------------------------------------------


def test_request_is_200_with_a_json_response(http_client: HttpClient) -> None:
    r = post(http_client)
    assert r.status_code == 200
    assert r.headers["content-type"].split(";")[0] == "application/json"
    obj = r.json()
    assert_response_object(obj)
    assert obj["result"]["protocol"] == PROTOCOL


@ENVELOPE
def test_notification_is_202_with_an_empty_body(http_client: HttpClient) -> None:
    for method in ("memory/describe", "memory/recall", "memory/remember", "memory/bogus"):
        r = post(http_client, orjson.dumps({"jsonrpc": "2.0", "method": method, "params": {}}))
        assert r.status_code == 202, method
        assert r.content == b"", method


@ENVELOPE
@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"memory/bogus"}', -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"memory/consolidate"}', -32003),
        (b'{"jsonrpc":"2.0","id":1,"method":"memory/remember","params":{}}', -32004),
        (b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"limit":"x"}}', -32602),
        (b"{nope", -32700),
        (b"[]", -32600),
        (b'{"id":1,"method":"memory/describe"}', -32600),
    ],
    ids=["not-found", "capability", "read-only", "params", "parse", "batch", "no-jsonrpc"],
)
def test_protocol_errors_are_200_with_an_error_object(
    http_client: HttpClient, body: bytes, code: int
) -> None:
    r = post(http_client, body)
    assert r.status_code == 200
    assert r.headers["content-type"].split(";")[0] == "application/json"
    obj = r.json()
    assert_response_object(obj)
    assert obj["error"]["code"] == code


@ENVELOPE
@pytest.mark.parametrize("path", ["/a2m"])
def test_get_on_the_endpoint_is_405(http_client: HttpClient, path: str) -> None:
    assert http_client.http.get(path).status_code == 405


@ENVELOPE
def test_get_on_a_named_store_endpoint_is_405(http_client: HttpClient) -> None:
    name = http_client.call("memory/describe")["name"]
    assert http_client.http.get(f"/a2m/{name}").status_code == 405


@ENVELOPE
@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_are_refused(http_client: HttpClient, method: str) -> None:
    r = http_client.http.request(method, "/a2m", content=DESCRIBE)
    assert r.status_code == 405


def test_named_store_endpoint_serves_the_same_store(http_client: HttpClient) -> None:
    describe = http_client.call("memory/describe")
    r = post_to(http_client, f"/a2m/{describe['name']}", DESCRIBE)
    assert r.status_code == 200
    assert r.json()["result"] == describe


def post_to(client: HttpClient, path: str, body: bytes, **headers: str) -> httpx.Response:
    return client.post(body, path=path, headers=headers)


@ENVELOPE
@pytest.mark.parametrize("path", ["/a2m/no-such-store", "/a2m/NoSuch", "/a2m/x%2Fy"])
def test_unknown_store_path_is_404(http_client: HttpClient, path: str) -> None:
    assert post_to(http_client, path, DESCRIBE).status_code == 404


@ENVELOPE
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/xml"],
)
def test_wrong_content_type_is_415(http_client: HttpClient, content_type: str) -> None:
    assert post_headers(http_client, {"content-type": content_type}).status_code == 415


@ENVELOPE
def test_missing_content_type_is_415(http_client: HttpClient) -> None:
    r = http_client.http.post("/a2m", content=DESCRIBE, headers={"content-type": ""})
    assert r.status_code == 415


@ENVELOPE
def test_json_content_type_with_charset_is_accepted(http_client: HttpClient) -> None:
    r = post_headers(http_client, {"content-type": "application/json; charset=utf-8"})
    assert r.status_code == 200
    assert "result" in r.json()


@ENVELOPE
def test_body_over_the_limit_is_413(http_client: HttpClient) -> None:
    limit = max_body_bytes()
    prefix = b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"'
    body = prefix + b"a" * (limit + 1 - len(prefix) - 3) + b'"}}'
    assert len(body) == limit + 1
    assert post(http_client, body).status_code == 413


@ENVELOPE
def test_chunked_body_over_the_limit_is_413(http_client: HttpClient) -> None:
    limit = max_body_bytes()

    def chunks() -> Iterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"'
        for _ in range(limit // 65536 + 2):
            yield b"a" * 65536
        yield b'"}}'

    r = http_client.post(chunks())
    assert r.status_code == 413


@ENVELOPE
def test_body_at_the_limit_is_not_413(http_client: HttpClient) -> None:
    limit = max_body_bytes()
    prefix = b'{"jsonrpc":"2.0","id":1,"method":"memory/describe","params":{"pad":"'
    body = prefix + b"a" * (limit - len(prefix) - 3) + b'"}}'
    assert len(body) == limit
    r = post(http_client, body)
    assert r.status_code == 200
    assert "result" in r.json(), "unknown params are ignored, whatever their size"


# -- Origin ----------------------------------------------------------------------------------------


@ENVELOPE
@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://127.0.0.1:1", "http://localhost"]
)
def test_disallowed_origin_is_403_by_default(http_client: HttpClient, origin: str) -> None:
    # §8.3.1 SHOULD permit no origin by default; whatever is not permitted MUST be 403.
    assert post(http_client, origin=origin).status_code == 403


@ENVELOPE
def test_no_origin_is_fine(http_client: HttpClient) -> None:
    r = http_client.post(DESCRIBE)
    assert "origin" not in {k.lower() for k in r.request.headers}
    assert r.status_code == 200


@ENVELOPE
def test_allowed_origin_is_served(origins_client: HttpClient) -> None:
    r = post(origins_client, origin=ALLOWED)
    assert r.status_code == 200
    assert r.json()["result"]["protocol"] == PROTOCOL
    assert post(origins_client, origin="http://localhost:3000").status_code == 200


@ENVELOPE
@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "https://agent.example.evil.example",
        "https://agent.example:8443",
        "http://agent.example",
        "null",
    ],
)
def test_origin_outside_the_allow_list_is_403(origins_client: HttpClient, origin: str) -> None:
    assert post(origins_client, origin=origin).status_code == 403


@ENVELOPE
def test_no_origin_is_fine_with_an_allow_list(origins_client: HttpClient) -> None:
    assert origins_client.post(DESCRIBE).status_code == 200


@ENVELOPE
def test_origin_is_checked_before_anything_else(http_client: HttpClient) -> None:
    # A browser page must learn nothing, not even whether its body parsed.
    for body in (b"{nope", b'{"jsonrpc":"2.0","method":"memory/describe"}'):
        assert post(http_client, body, origin="https://evil.example").status_code == 403


@ENVELOPE
def test_well_known_refuses_a_disallowed_origin(http_client: HttpClient) -> None:
    r = http_client.http.get("/.well-known/a2m-server.json", headers={"origin": "https://e.x"})
    assert r.status_code == 403


# -- A2M-Protocol-Version --------------------------------------------------------------------------


@ENVELOPE
def test_version_header_of_this_version_is_fine(http_client: HttpClient) -> None:
    r = post_headers(http_client, {"A2M-Protocol-Version": PROTOCOL})
    assert r.status_code == 200
    assert "result" in r.json()


@ENVELOPE
def test_absent_version_header_is_fine(http_client: HttpClient) -> None:
    r = http_client.post(DESCRIBE)
    assert "a2m-protocol-version" not in {k.lower() for k in r.request.headers}
    assert r.status_code == 200


@ENVELOPE
@pytest.mark.parametrize("version", ["a2m/0.2", "a2m/1.0", "a2m/0", "garbage", "mcp/2025-06-18"])
def test_unknown_version_header_is_400_with_protocol_not_supported(
    http_client: HttpClient, version: str
) -> None:
    r = post_headers(http_client, {"A2M-Protocol-Version": version})
    assert r.status_code == 400
    obj = r.json()
    assert_response_object(obj)
    assert obj["error"]["code"] == -32007


@ENVELOPE
def test_unknown_version_header_is_refused_without_parsing_the_body(
    http_client: HttpClient,
) -> None:
    r = post_headers(http_client, {"A2M-Protocol-Version": "a2m/9.9"}, b"{nope")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32007


# -- well-known profile ----------------------------------------------------------------------------


def test_well_known_profile_matches_describe(http_client: HttpClient) -> None:
    r = http_client.http.get("/.well-known/a2m-server.json")
    assert r.status_code == 200
    assert r.headers["content-type"].split(";")[0] == "application/json"
    profile: dict[str, Any] = r.json()
    assert_valid("describeResult", profile, "well-known profile")
    describe = http_client.call("memory/describe", {"protocol": PROTOCOL})
    for name in ("protocol", "name", "capabilities", "methods", "read_only", "limits"):
        assert profile[name] == describe[name], name
    for name in ("embeddings", "prompt"):
        if name in describe:
            assert profile[name] == describe[name], name


def test_store_well_known_profile_matches_describe(http_client: HttpClient) -> None:
    describe = http_client.call("memory/describe", {"protocol": PROTOCOL})
    r = http_client.http.get(f"/a2m/{describe['name']}/.well-known/a2m-server.json")
    assert r.status_code == 200
    profile = r.json()
    assert_valid("describeResult", profile, "per-store well-known profile")
    for name in ("protocol", "name", "capabilities", "methods", "read_only", "limits"):
        assert profile[name] == describe[name], name


# -- deployment defaults ---------------------------------------------------------------------------


def _listening_addresses(port: int) -> set[str]:
    out: set[str] = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(addr)
            if family == socket.AF_INET:
                out.add(socket.inet_ntop(family, raw[::-1]))
            else:
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                out.add(socket.inet_ntop(family, words))
    return out


@ENVELOPE
def test_serve_binds_loopback_by_default(http_server: HttpServer) -> None:
    # §8.3.1 SHOULD: the session server was started without --host.
    port = int(http_server.base_url.rsplit(":", 1)[1])
    addresses = _listening_addresses(port)
    assert addresses, "no listening socket found in /proc/net"
    assert addresses <= {"127.0.0.1", "::1"}, addresses
