"""Every way a JWKS fetch fails is one failed fetch: cooled down, single flight, a 401.

The identity provider here is a real socket that fails the way real ones do: a reset
before or in the middle of the answer, a hang, a trickle, a TLS error (an untrusted
certificate, or a broken record after the handshake), a truncated body, a redirect
loop, and bodies that are not a key set. Fifty tokens with unknown ``kid``s must
cost one fetch, each be refused with AuthenticationError (401 on the wire), and log
no traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, JwtConfig
from gateway.security.credential import AuthenticationError
from gateway.security.jwt_auth import JwtVerifier
from tests.security.support import (
    AUDIENCE,
    ISSUER,
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
from tests.support.certs import write_self_signed
from tests.support.raw_peer import Connection, RawPeer, head

TOKENS = 50
TIMEOUT_MS = 3000
"""Long enough for a loaded machine to connect and shake hands; a hang costs this once."""


def reset_at_once(conn: Connection) -> None:
    conn.reset()


def reset_mid_body(conn: Connection) -> None:
    conn.read_head()
    conn.send(head("200 OK", 4000) + b'{"keys": [{"kty": "RSA", ')
    conn.reset()


def hang(conn: Connection) -> None:
    conn.read_head()
    conn.hold()


def trickle(conn: Connection) -> None:
    conn.read_head()
    conn.send(head("200 OK", 100_000))
    while not conn.stop.wait(0.05):  # each byte well within the read timeout
        conn.send(b" ")


def truncated(conn: Connection) -> None:
    conn.read_head()
    conn.send(head("200 OK", 4000) + b'{"keys": [')
    conn.sock.shutdown(2)


def redirect_loop(conn: Connection) -> None:
    conn.read_head()
    conn.send(head("302 Found", 0, "Location: /jwks.json\r\n"))


def serving(body: bytes, status: str = "200 OK") -> Callable[[Connection], None]:
    def behave(conn: Connection) -> None:
        conn.read_head()
        conn.send(head(status, len(body)) + body)

    return behave


def tls_record_garbage(conn: Connection) -> None:
    """A sound handshake and head, then bytes that are no TLS record."""
    conn.read_head()
    conn.send(head("200 OK", 4000))
    os.write(conn.sock.fileno(), b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
    conn.hold()


NOT_A_JWKS = {
    "a list": b"[]",
    "keys not a list": b'{"keys": "rsa-1"}',
    "no keys": b'{"keys": []}',
    "keys of the wrong types": b'{"keys": [5, {"kty": "RSA", "n": 5, "e": []}, {"kty": []}]}',
    "html": b"<html><body>Service Unavailable</body></html>",
    "not utf-8": b'{"keys": "\xff\xfe"}',
    "too large": b'{"keys": [' + b" " * (2 << 20) + b"]}",
}

FAILURES: dict[str, Callable[[Connection], None]] = {
    "reset at once": reset_at_once,
    "reset mid-body": reset_mid_body,
    "hang": hang,
    "trickle": trickle,
    "truncated body": truncated,
    "redirect loop": redirect_loop,
    "HTTP 500": serving(b'{"error": "down"}', "500 Internal Server Error"),
    **{f"body: {name}": serving(body) for name, body in NOT_A_JWKS.items()},
}


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""
    return write_self_signed(tmp_path_factory.mktemp("tls"), "test idp")


def server_tls(files: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*files)
    return ctx


@pytest.fixture
def peers() -> Iterator[list[RawPeer]]:
    started: list[RawPeer] = []
    yield started
    for peer in started:
        peer.close()


def verifier(url: str, **overrides: Any) -> JwtVerifier:
    settings: dict[str, Any] = {
        "issuer": ISSUER,
        "audience": [AUDIENCE],
        "algorithms": ["RS256"],
        "jwks_url": url,
        "jwks_cooldown_s": 3600,
        "jwks_timeout_ms": TIMEOUT_MS,
        **overrides,
    }
    return JwtVerifier(JwtConfig(**settings))


async def refuse_all(v: JwtVerifier, issuer: Issuer) -> list[BaseException | None]:
    async def one(i: int) -> BaseException | None:
        try:
            await v.verify(issuer.token(kid=f"unknown-{i}"))
        except AuthenticationError as exc:
            return exc
        return None

    return await asyncio.gather(*(one(i) for i in range(TOKENS)))


def assert_quiet(caplog: pytest.LogCaptureFixture, peer: RawPeer) -> None:
    """No traceback, nothing above a warning, and never the provider's address."""
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert record.levelno <= logging.WARNING, record.getMessage()
        assert str(peer.port) not in record.getMessage()
    assert any("JWKS fetch failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
async def test_a_failing_provider_costs_one_fetch_and_answers_401(
    failure: Callable[[Connection], None],
    issuer: Issuer,
    peers: list[RawPeer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    peer = RawPeer(failure)
    peers.append(peer)
    v = verifier(peer.url)
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    outcomes = await refuse_all(v, issuer)
    assert all(isinstance(o, AuthenticationError) for o in outcomes)
    assert {o.reason for o in outcomes if isinstance(o, AuthenticationError)} == {
        "JWKS unavailable"
    }
    assert peer.wait_accepted() == 1
    assert v.jwks is not None
    assert v.jwks.fetches == 1
    # Bounded by the fetch timeout (and its one-second margin), not by the peer.
    assert time.monotonic() - started < TIMEOUT_MS / 1000 + 5
    assert_quiet(caplog, peer)


async def test_an_untrusted_certificate_is_a_failed_fetch(
    tls_files: tuple[Path, Path],
    issuer: Issuer,
    peers: list[RawPeer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    peer = RawPeer(serving(json.dumps(issuer.jwks()).encode()), tls=server_tls(tls_files))
    peers.append(peer)
    v = verifier(peer.url)
    caplog.set_level(logging.INFO)
    outcomes = await refuse_all(v, issuer)
    assert all(isinstance(o, AuthenticationError) for o in outcomes)
    assert peer.wait_accepted() == 1
    assert_quiet(caplog, peer)
    assert any("TLS error" in r.getMessage() for r in caplog.records)


async def test_a_broken_tls_record_mid_answer_is_a_failed_fetch(
    tls_files: tuple[Path, Path],
    issuer: Issuer,
    peers: list[RawPeer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    peer = RawPeer(tls_record_garbage, tls=server_tls(tls_files))
    peers.append(peer)
    v = verifier(peer.url, jwks_ca_file=str(tls_files[0]))
    caplog.set_level(logging.INFO)
    outcomes = await refuse_all(v, issuer)
    assert all(isinstance(o, AuthenticationError) for o in outcomes)
    assert peer.wait_accepted() == 1
    assert_quiet(caplog, peer)
    assert any("TLS error" in r.getMessage() for r in caplog.records)


async def test_a_private_ca_is_trusted_when_configured(
    tls_files: tuple[Path, Path], issuer: Issuer, peers: list[RawPeer]
) -> None:
    # The control for the two TLS tests above: the same server, trusted, serves keys.
    peer = RawPeer(serving(json.dumps(issuer.jwks()).encode()), tls=server_tls(tls_files))
    peers.append(peer)
    v = verifier(peer.url, jwks_ca_file=str(tls_files[0]))
    assert (await v.verify(issuer.token())).subject == "alice"


def test_an_unreadable_ca_file_fails_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ConfigError, match="jwks_ca_file"):
        verifier("https://127.0.0.1:1/jwks.json", jwks_ca_file=str(bad))


async def test_one_odd_key_does_not_void_the_set(issuer: Issuer, peers: list[RawPeer]) -> None:
    data = issuer.jwks()
    data["keys"] = [{"kty": "RSA", "n": 5}, {"kty": "nope"}, *data["keys"]]
    peer = RawPeer(serving(json.dumps(data).encode()))
    peers.append(peer)
    assert (await verifier(peer.url).verify(issuer.token())).subject == "alice"


async def test_the_provider_back_is_used_after_the_cooldown(
    issuer: Issuer, peers: list[RawPeer]
) -> None:
    good = serving(json.dumps(issuer.jwks()).encode())
    current: list[Callable[[Connection], None]] = [reset_mid_body]
    peer = RawPeer(lambda conn: current[0](conn))
    peers.append(peer)
    v = verifier(peer.url, jwks_cooldown_s=0)
    with pytest.raises(AuthenticationError):
        await v.verify(issuer.token())
    current[0] = good
    assert (await v.verify(issuer.token())).subject == "alice"


async def test_over_http_a_resetting_provider_gives_401_then_429_and_one_fetch(
    issuer: Issuer, peers: list[RawPeer], caplog: pytest.LogCaptureFixture
) -> None:
    peer = RawPeer(reset_at_once)
    peers.append(peer)
    section = auth_section(issuer, jwks_file=None, jwks_url=peer.url, jwks_cooldown_s=3600)
    gateway = build_gateway(
        {"auth": section},
        {"docs": memory_store_config(scope={"filters": [{"field": "acl", "claims": ["groups"]}]})},
        {"docs": MemoryConnector(acl_docs())},
    )
    caplog.set_level(logging.INFO)
    statuses: list[int] = []
    async with asgi_client(gateway) as client:
        for i in range(TOKENS):
            response = await client.post(
                "/a2m/docs",
                json=rpc("memory/recall", {"query": "deploy keys"}),
                headers=bearer(issuer.token(kid=f"unknown-{i}")),
            )
            statuses.append(response.status_code)
    await gateway.close()
    assert set(statuses) == {401, 429}
    assert statuses[0] == 401
    assert statuses[-1] == 429
    assert peer.wait_accepted() == 1
    assert_quiet(caplog, peer)
