"""The engine HTTP/1.1 client (connectors/http1.py) against a loopback peer that misbehaves.

Each peer is a real socket server (tests/support/raw_peer.py): keep-alive, closes and
resets before or during an answer, hangs, bytes that are not HTTP, chunked and gzip
bodies, TLS. The client's resend of a request that met a dead reused connection is
tried here byte by byte; test_recovery.py tries it against real engines behind a proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.http1 import (
    AnswerLimits,
    AnswerTooLarge,
    BadResponse,
    HostPool,
    RequestHead,
    host_header,
)
from tests.support.certs import write_self_signed
from tests.support.raw_peer import Connection, RawPeer, head

GET = RequestHead("127.0.0.1", {"accept": "application/json"}).build("GET", "/", None)


def _answer_each(conn: Connection) -> None:
    """Keep-alive: answer every request on the connection."""
    while conn.read_head():
        conn.send(head("200 OK", 2) + b"{}")


@contextlib.contextmanager
def _peer(behave: object, tls: ssl.SSLContext | None = None) -> Iterator[RawPeer]:
    peer = RawPeer(behave, tls)  # type: ignore[arg-type]
    try:
        yield peer
    finally:
        peer.close()


@pytest.fixture
def keep_alive() -> Iterator[RawPeer]:
    with _peer(_answer_each) as peer:
        yield peer


def _pool(peer: RawPeer, limit: int = 4, tls: ssl.SSLContext | None = None) -> HostPool:
    return HostPool("127.0.0.1", peer.port, tls=tls, limit=limit)


async def test_requests_reuse_one_keep_alive_connection(keep_alive: RawPeer) -> None:
    pool = _pool(keep_alive)
    answers = [await pool.request(GET, 5.0) for _ in range(3)]
    await pool.close()
    assert [(a.status, a.body) for a in answers] == [(200, b"{}")] * 3
    assert answers[0].headers["content-type"] == "application/json"
    assert keep_alive.accepted == 1


def _first_answers_then(end: str) -> object:
    """The first connection answers one request, then meets the next one with a close
    or a reset; later connections answer every request."""
    seen = threading.Event()

    def behave(conn: Connection) -> None:
        if seen.is_set():
            _answer_each(conn)
            return
        seen.set()
        conn.read_head()
        conn.send(head("200 OK", 2) + b"{}")
        conn.read_head()
        if end == "reset":
            conn.reset()

    return behave


@pytest.mark.parametrize("end", ["close", "reset"])
async def test_a_request_meeting_a_dead_reused_connection_is_sent_again(end: str) -> None:
    with _peer(_first_answers_then(end)) as peer:
        pool = _pool(peer)
        first = await pool.request(GET, 5.0)
        second = await pool.request(GET, 5.0)
        await pool.close()
        assert (first.status, second.status) == (200, 200)
        assert peer.accepted == 2  # the resend took a fresh connection


async def test_a_fresh_connection_closed_before_an_answer_raises() -> None:
    with _peer(lambda conn: conn.read_head()) as peer:
        pool = _pool(peer)
        with pytest.raises(ConnectionError):
            await pool.request(GET, 5.0)
        await pool.close()
        assert peer.accepted == 1  # no resend: the engine may have seen it


def _reused_then_cut(conn: Connection) -> None:
    conn.read_head()
    conn.send(head("200 OK", 2) + b"{}")
    conn.read_head()
    conn.send(head("200 OK", 100) + b'{"hits":')  # 8 of 100 bytes, then the close


async def test_an_answer_cut_short_raises_and_is_not_sent_again() -> None:
    with _peer(_reused_then_cut) as peer:
        pool = _pool(peer)
        assert (await pool.request(GET, 5.0)).status == 200
        with pytest.raises(ConnectionResetError, match="mid-answer"):
            await pool.request(GET, 5.0)
        await pool.close()
        assert peer.accepted == 1  # an answer had begun: the engine saw the request


async def test_an_engine_that_never_answers_times_out_at_the_deadline() -> None:
    def hang(conn: Connection) -> None:
        conn.read_head()
        conn.hold()

    with _peer(hang) as peer:
        pool = _pool(peer)
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            await pool.request(GET, 0.3)
        assert time.monotonic() - start < 5.0
        await pool.close()


def _sends(data: bytes) -> object:
    def behave(conn: Connection) -> None:
        conn.read_head()
        conn.send(data)
        conn.hold()

    return behave


async def test_bytes_that_are_not_http_are_a_bad_response() -> None:
    with _peer(_sends(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")) as peer:
        pool = _pool(peer)
        with pytest.raises(BadResponse):
            await pool.request(GET, 5.0)
        await pool.close()


async def test_a_chunked_answer_is_joined() -> None:
    chunked = (
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n'
    )
    with _peer(_sends(chunked)) as peer:
        pool = _pool(peer)
        assert (await pool.request(GET, 5.0)).body == b'{"a":1}'
        await pool.close()


async def test_a_gzip_answer_is_decompressed() -> None:
    packed = gzip.compress(b'{"took":1}')
    with _peer(_sends(head("200 OK", len(packed), "Content-Encoding: gzip\r\n") + packed)) as peer:
        pool = _pool(peer)
        assert (await pool.request(GET, 5.0)).body == b'{"took":1}'
        await pool.close()


async def test_a_head_answer_ends_with_its_headers() -> None:
    with _peer(_sends(head("200 OK", 500))) as peer:  # a length, and no body follows
        pool = _pool(peer)
        answer = await pool.request(GET.replace(b"GET", b"HEAD", 1), 5.0, head_only=True)
        await pool.close()
        assert (answer.status, answer.body) == (200, b"")


async def test_repeated_headers_are_joined() -> None:
    answer_bytes = head("429 Too Many Requests", 2, "Warning: a\r\nWarning: b\r\n") + b"{}"
    with _peer(_sends(answer_bytes)) as peer:
        pool = _pool(peer)
        answer = await pool.request(GET, 5.0)
        await pool.close()
        assert (answer.status, answer.headers["warning"]) == (429, "a, b")


async def test_the_pool_never_opens_more_than_its_limit() -> None:
    lock = threading.Lock()
    live = [0, 0]  # now, most

    def slow(conn: Connection) -> None:
        with lock:
            live[0] += 1
            live[1] = max(live[1], live[0])
        try:
            while conn.read_head():
                time.sleep(0.02)
                conn.send(head("200 OK", 2) + b"{}")
        finally:
            with lock:
                live[0] -= 1

    with _peer(slow) as peer:
        pool = _pool(peer, limit=2)
        answers = await asyncio.gather(*(pool.request(GET, 10.0) for _ in range(8)))
        await pool.close()
        assert [a.status for a in answers] == [200] * 8
        assert peer.accepted == 2
        assert live[1] == 2


async def test_room_given_to_a_waiter_cancelled_before_it_ran_goes_to_the_next(
    keep_alive: RawPeer,
) -> None:
    pool = _pool(keep_alive, limit=1)
    first = asyncio.ensure_future(pool.request(GET, 5.0))
    second = asyncio.ensure_future(pool.request(GET, 2.0))
    # This request opens the only connection; while it connects, both tasks queue for it.
    own = await pool.request(GET, 5.0)
    # Its release has just handed the room to `first`, which has not run yet.
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    answer = await second  # without the hand-on it would wait for its deadline
    await pool.close()
    assert (own.status, answer.status) == (200, 200)
    assert keep_alive.accepted == 1


async def test_a_cancelled_request_leaves_its_connection_unused() -> None:
    served = threading.Event()

    def first_hangs(conn: Connection) -> None:
        if not served.is_set():
            served.set()
            conn.read_head()
            conn.hold()
            return
        _answer_each(conn)

    with _peer(first_hangs) as peer:
        pool = _pool(peer)
        task = asyncio.ensure_future(pool.request(GET, 30.0))
        await asyncio.to_thread(served.wait, 10.0)  # the request is on its way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await pool.request(GET, 5.0)).status == 200
        await pool.close()
        assert peer.accepted == 2  # the cancelled one's answer could still arrive: not reused


async def test_tls_with_the_clients_context(tmp_path: Path) -> None:
    cert, key = write_self_signed(tmp_path, "engine")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))
    with _peer(_answer_each, tls=server) as peer:
        pool = _pool(peer, tls=trusting)
        assert (await pool.request(GET, 5.0)).status == 200
        await pool.close()
        stranger = _pool(peer, tls=ssl.create_default_context())
        with pytest.raises(ssl.SSLError):
            await stranger.request(GET, 5.0)
        await stranger.close()


def test_a_request_head_is_the_fixed_lines_then_the_call_s_own() -> None:
    heads = RequestHead("node:9200", {"Content-Type": "application/json", "x-a": "1"})
    assert heads.build("POST", "/i/_search?x=1", 2, {"content-type": "application/x-ndjson"}) == (
        b"POST /i/_search?x=1 HTTP/1.1\r\nhost: node:9200\r\n"
        b"content-type: application/x-ndjson\r\nx-a: 1\r\ncontent-length: 2\r\n\r\n"
    )
    assert heads.build("GET", "/", None) == (
        b"GET / HTTP/1.1\r\nhost: node:9200\r\ncontent-type: application/json\r\nx-a: 1\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/i/_search", {"x-trace": "a\r\nx-admin: 1"}),
        ("/i/_search", {"x-trace\n": "a"}),
        ("/i/_search HTTP/1.1\r\nx: y", None),
        ("/i/_se arch", None),
        ("/i/_search\0", None),
    ],
    ids=["crlf-in-value", "lf-in-name", "crlf-in-target", "space-in-target", "nul"],
)
def test_a_head_that_would_split_the_request_is_refused(
    target: str, headers: dict[str, str] | None
) -> None:
    with pytest.raises(ValueError, match="holds a"):
        RequestHead("node:9200", {}).build("GET", target, None, headers)


def test_fixed_headers_that_would_split_the_request_are_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        RequestHead("node:9200", {"authorization": "Bearer a\r\nx-admin: 1"})


async def test_a_connection_idle_too_long_is_not_reused(keep_alive: RawPeer) -> None:
    pool = HostPool("127.0.0.1", keep_alive.port, idle_s=0.05)
    assert (await pool.request(GET, 5.0)).status == 200
    assert (await pool.request(GET, 5.0)).status == 200  # at once: the same connection
    await asyncio.sleep(0.1)
    assert (await pool.request(GET, 5.0)).status == 200
    await pool.close()
    assert keep_alive.accepted == 2


async def test_a_connection_the_engine_closed_while_idle_is_replaced() -> None:
    closed = threading.Event()

    def answer_once_then_close(conn: Connection) -> None:
        conn.read_head()
        conn.send(head("200 OK", 2) + b"{}")  # keep-alive by default, then a close anyway
        conn.sock.close()
        closed.set()

    with _peer(answer_once_then_close) as peer:
        pool = _pool(peer)
        assert (await pool.request(GET, 5.0)).status == 200
        await asyncio.to_thread(closed.wait, 10.0)
        assert (await pool.request(GET, 5.0)).status == 200  # the close read or met: no error
        await pool.close()
        assert peer.accepted == 2


@pytest.mark.parametrize(
    ("host", "port", "tls", "value"),
    [
        ("node", 9200, False, "node:9200"),
        ("node", 80, False, "node"),
        ("node", 443, True, "node"),
        ("node", 80, True, "node:80"),
        ("::1", 9200, False, "[::1]:9200"),
    ],
)
def test_the_host_header_leaves_out_the_schemes_port(
    host: str, port: int, tls: bool, value: str
) -> None:
    assert host_header(host, port, tls=tls) == value


def _answers_before_the_body(conn: Connection) -> None:
    """Answers a request once its head is read, then reads on as if what is left of its
    body began the next request, and refuses that one."""
    conn.read_head()
    conn.send(head("200 OK", 2) + b"{}")
    tail = b""
    while b"\r\n\r\n" not in tail:
        chunk = conn.sock.recv(1 << 16)
        if not chunk:
            return
        tail = tail[-3:] + chunk
    conn.send(head("400 Bad Request", 2) + b"{}")
    conn.hold()


async def test_an_answer_before_the_request_was_all_sent_leaves_its_connection_unused() -> None:
    served = threading.Event()

    def behave(conn: Connection) -> None:
        if served.is_set():
            _answer_each(conn)
            return
        served.set()
        _answers_before_the_body(conn)

    body = b"x" * (32 << 20)  # more than the sockets' buffers hold: the writing lags
    post = RequestHead("127.0.0.1", {}).build("POST", "/", len(body)) + body
    with _peer(behave) as peer:
        pool = _pool(peer)
        first = await pool.request(post, 10.0)
        second = await pool.request(GET, 10.0)
        await pool.close()
        assert (first.status, second.status) == (200, 200)
        assert peer.accepted == 2


async def test_a_head_growing_past_the_limit_is_refused_before_its_field_ends() -> None:
    def endless_field(conn: Connection) -> None:
        conn.read_head()
        conn.send(b"HTTP/1.1 200 OK\r\nX-Endless: ")
        for _ in range(64):
            conn.send(b"a" * 1024)  # the field's line never ends
        conn.hold()

    with _peer(endless_field) as peer:
        pool = HostPool("127.0.0.1", peer.port, limits=AnswerLimits(header_bytes=4096))
        with pytest.raises(AnswerTooLarge, match="headers are past the store's limit"):
            await pool.request(GET, 10.0)
        await pool.close()
