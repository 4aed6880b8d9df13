"""Every form an engine's answer may take on the wire, through both Lucene connectors.

A scripted server on real sockets stands where the Elasticsearch or OpenSearch node
would be and sends each answer byte for byte; the connector's client (the official
client over the gateway's HTTP layer) must read every legal form as the answer to its
own request, and turn every answer that is not what it asked for into a connector
error that says what came back, never the caller's refusal (``EngineRejected``).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from connectors.errors import (
    ConnectorError,
    EngineAnswerInvalid,
    EngineAnswerUnusable,
    EngineRejected,
)
from connectors.lucene.client import LuceneClient
from connectors.lucene.dialect import Dialect
from connectors.lucene.elasticsearch import ElasticsearchDialect
from connectors.lucene.opensearch import OpenSearchDialect
from connectors.lucene.spec import LuceneConnectionSpec
from connectors.spec import ConnectorSpec
from tests.support.scripted_peer import (
    Reply,
    ScriptedPeer,
    ScriptedRequest,
    answer,
    chunked,
    deflate,
    gzip_members,
    interim,
    search_answer,
    status_line,
)

ENGINES = ["elasticsearch", "opensearch"]
JSON_HEADERS = [("Content-Type", "application/json"), ("X-Elastic-Product", "Elasticsearch")]


def dialect_of(engine: str) -> Dialect:
    return ElasticsearchDialect() if engine == "elasticsearch" else OpenSearchDialect()


@asynccontextmanager
async def lucene_client(
    engine: str, peer: ScriptedPeer, **connection: Any
) -> AsyncIterator[LuceneClient]:
    """The connector's engine client for ``engine`` over ``peer``, no retries of its own."""
    options: dict[str, Any] = {"hosts": (peer.url,), "retries": 0, "timeout_ms": 5000}
    spec = ConnectorSpec(engine, "idx", LuceneConnectionSpec(**{**options, **connection}))
    client = LuceneClient(spec, dialect_of(engine))
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


def marker_of(request: ScriptedRequest) -> str:
    """Which query a request carries (the term the test searched for)."""
    term: str = orjson.loads(request.body)["query"]["term"]["body"]
    return term


async def search(client: LuceneClient, marker: str) -> str:
    """Search for ``marker``; the id of the hit the answer holds."""
    body = {"query": {"term": {"body": marker}}}
    found = await client.read_call("POST", "/idx/_search", body=body)
    hit_id: str = found["hits"]["hits"][0]["_id"]
    return hit_id


def _encoded(coding: str, data: bytes) -> bytes:
    return answer(200, data, [*JSON_HEADERS, ("Content-Encoding", coding)])


LEGAL: dict[str, Callable[[bytes], Reply]] = {
    "100-continue-then-answer": lambda b: Reply(
        [interim(100, "Continue"), answer(200, b, JSON_HEADERS)]
    ),
    "103-early-hints-then-answer": lambda b: Reply(
        [interim(103, "Early Hints", "Link: </a.css>; rel=preload"), answer(200, b, JSON_HEADERS)]
    ),
    "three-interim-answers-in-one-write": lambda b: Reply(
        [
            interim(100, "Continue")
            + interim(102, "Processing")
            + interim(103, "Early Hints", "Link: </a.css>; rel=preload")
            + answer(200, b, JSON_HEADERS)
        ]
    ),
    "http-1.0-body-ended-by-the-close": lambda b: Reply(
        [answer(200, b, JSON_HEADERS, length=False, version="1.0")], then="close"
    ),
    "http-1.1-body-ended-by-the-close": lambda b: Reply(
        [answer(200, b, [*JSON_HEADERS, ("Connection", "close")], length=False)], then="close"
    ),
    "close-delimited-in-pieces": lambda b: Reply(
        [answer(200, b[:10], JSON_HEADERS, length=False), b[10:]], then="close"
    ),
    "gzip-named-in-capitals": lambda b: Reply([_encoded("GZIP", gzip.compress(b))]),
    "x-gzip": lambda b: Reply([_encoded("x-gzip", gzip.compress(b))]),
    "gzip-of-two-members": lambda b: Reply([_encoded("gzip", gzip_members(b, 2))]),
    "gzip-of-three-members-chunked": lambda b: Reply(
        [
            status_line(200)
            + b"Content-Type: application/json\r\nX-Elastic-Product: Elasticsearch\r\n"
            + b"Transfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n"
            + chunked(gzip_members(b, 3))
        ]
    ),
    "deflate-zlib-wrapped": lambda b: Reply([_encoded("deflate", deflate(b, raw=False))]),
    "deflate-raw": lambda b: Reply([_encoded("Deflate", deflate(b, raw=True))]),
    "identity-named": lambda b: Reply([_encoded("identity", b)]),
    "gzip-transfer-coding-then-chunked": lambda b: Reply(
        [
            status_line(200)
            + b"Content-Type: application/json\r\nX-Elastic-Product: Elasticsearch\r\n"
            + b"Transfer-Encoding: gzip, chunked\r\n\r\n"
            + chunked(gzip.compress(b))
        ]
    ),
    "transfer-coding-not-chunked-ends-with-the-close": lambda b: Reply(
        [
            answer(
                200, gzip.compress(b), [*JSON_HEADERS, ("Transfer-Encoding", "gzip")], length=False
            )
        ],
        then="close",
    ),
    "chunked-with-extensions-and-trailers": lambda b: Reply(
        [
            status_line(200)
            + b"Content-Type: application/json\r\nX-Elastic-Product: Elasticsearch\r\n"
            + b"Transfer-Encoding: chunked\r\nTrailer: X-Took\r\n\r\n"
            + chunked(b).replace(b"\r\n", b";note=1\r\n", 1)[:-2]
            + b"X-Took: 3\r\n\r\n"
        ]
    ),
    "status-line-without-reason": lambda b: Reply(
        [answer(200, b, JSON_HEADERS).replace(b"200 OK", b"200", 1)]
    ),
    "lines-ended-by-bare-lf": lambda b: Reply(
        [
            answer(200, b"", JSON_HEADERS).replace(b"\r\n", b"\n")[: -len("Content-Length: 0\n\n")]
            + f"Content-Length: {len(b)}\n\n".encode()
            + b
        ]
    ),
    "obs-folded-header": lambda b: Reply(
        [answer(200, b, [*JSON_HEADERS, ("X-Note", "first part\r\n  folded second part")])]
    ),
}


@pytest.mark.parametrize("form", list(LEGAL))
@pytest.mark.parametrize("engine", ENGINES)
async def test_a_legal_answer_form_is_each_requests_own_answer(engine: str, form: str) -> None:
    def script(request: ScriptedRequest) -> Reply:
        return LEGAL[form](search_answer(marker_of(request)))

    with ScriptedPeer(script) as peer:
        async with lucene_client(engine, peer) as client:
            got = [await search(client, marker) for marker in ("first", "second", "third")]
    assert got == ["first", "second", "third"]
    assert [marker_of(r) for r in peer.requests] == ["first", "second", "third"]


def _first_answers_then(second: Reply) -> Callable[[ScriptedRequest], Reply]:
    """A connection answers its first request, then meets its second with ``second``;
    every later connection answers normally."""

    def script(request: ScriptedRequest) -> Reply:
        if request.connection == 0 and request.on_connection == 1:
            return second
        return Reply([answer(200, search_answer(marker_of(request)), JSON_HEADERS)])

    return script


REUSED_TROUBLE = {
    "408-then-close": Reply(
        [answer(408, b"", [("Connection", "close"), ("Content-Type", "text/plain")])],
        then="close",
    ),
    "close-without-answer": Reply(then="close"),
    "reset-without-answer": Reply(then="reset"),
}


@pytest.mark.parametrize("trouble", list(REUSED_TROUBLE))
@pytest.mark.parametrize("engine", ENGINES)
async def test_a_reused_connection_timed_out_or_closed_sends_the_request_again_on_a_fresh_one(
    engine: str, trouble: str
) -> None:
    with ScriptedPeer(_first_answers_then(REUSED_TROUBLE[trouble])) as peer:
        async with lucene_client(engine, peer) as client:
            got = [await search(client, marker) for marker in ("one", "two")]
    assert got == ["one", "two"]
    assert peer.accepted == 2
    sent = [(r.connection, r.on_connection, marker_of(r)) for r in peer.requests]
    assert sent == [(0, 0, "one"), (0, 1, "two"), (1, 0, "two")]


def _corrupted(data: bytes) -> bytes:
    """``data`` with the bytes after its 10-byte gzip header flipped."""
    return data[:10] + bytes(b ^ 0xFF for b in data[10:])


PAGE = b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>"

BAD: dict[str, tuple[Reply, dict[str, int], type[ConnectorError], str]] = {
    "login-page": (
        Reply([answer(200, PAGE, [("Content-Type", "text/html; charset=utf-8")])]),
        {},
        EngineAnswerInvalid,
        "answered 200 with text/html, not JSON: is a login page or proxy",
    ),
    "no-content-type": (
        Reply([answer(200, b"hello", [])]),
        {},
        EngineAnswerInvalid,
        "answered 200 with no content type, not JSON",
    ),
    "json-that-is-not": (
        Reply([answer(200, b'{"hits": [', JSON_HEADERS)]),
        {},
        EngineAnswerInvalid,
        "not valid JSON",
    ),
    "empty-body": (
        Reply([answer(200, b"", JSON_HEADERS)]),
        {},
        EngineAnswerInvalid,
        "answered 200 with an empty body",
    ),
    "still-compressed": (
        Reply([answer(200, gzip.compress(search_answer("x")), JSON_HEADERS)]),
        {},
        EngineAnswerInvalid,
        "still gzip-compressed",
    ),
    "broken-gzip": (
        Reply([_encoded("gzip", _corrupted(gzip.compress(search_answer("x"))))]),
        {},
        EngineAnswerInvalid,
        "compressed answer is broken",
    ),
    "unknown-coding": (
        Reply([_encoded("br", b"\x0b\x02\x80{}\x03")]),
        {},
        EngineAnswerInvalid,
        "content coding br",
    ),
    "sign-on-redirect": (
        Reply([answer(302, b"", [("Location", "https://sso.example/login")])]),
        {},
        EngineAnswerInvalid,
        "answered 302, a redirect",
    ),
    "switching-protocols": (
        Reply([interim(101, "Switching Protocols", "Upgrade: websocket", "Connection: Upgrade")]),
        {},
        EngineAnswerInvalid,
        "switched protocols",
    ),
    "proxy-method-refusal": (
        Reply([answer(405, PAGE, [("Content-Type", "text/html")])]),
        {},
        EngineAnswerInvalid,
        "answered 405, which no engine sends",
    ),
    "headers-past-the-limit": (
        Reply([answer(200, search_answer("x"), [*JSON_HEADERS, ("X-Big", "a" * 4096)])]),
        {"max_header_bytes": 1024},
        EngineAnswerUnusable,
        "headers are past the store's limit",
    ),
    "body-past-the-limit": (
        Reply([answer(200, b'{"pad": "' + b"a" * 4096 + b'"}', JSON_HEADERS)]),
        {"max_body_bytes": 1024},
        EngineAnswerUnusable,
        "longer than the store's limit",
    ),
    "decompression-bomb": (
        Reply([_encoded("gzip", gzip.compress(b'{"pad": "' + b" " * 1_000_000 + b'"}'))]),
        {"max_decoded_bytes": 65536},
        EngineAnswerUnusable,
        "decompresses past the store's limit",
    ),
}


@pytest.mark.parametrize("form", list(BAD))
@pytest.mark.parametrize("engine", ENGINES)
async def test_an_answer_that_is_not_what_was_asked_for_is_a_connector_error_saying_so(
    engine: str, form: str
) -> None:
    reply, limits, error, says = BAD[form]
    with ScriptedPeer(lambda request: reply) as peer:
        async with lucene_client(engine, peer, **limits) as client:
            with pytest.raises(ConnectorError) as raised:
                await search(client, "q")
    assert type(raised.value) is error
    assert not isinstance(raised.value, EngineRejected)  # never the caller's refusal
    message = str(raised.value)
    assert says in message
    assert "127.0.0.1" not in message
    assert str(peer.port) not in message


class RacingScript:
    """Answers each request to its own query, but on the way: interim answers written
    apart from the final one, a 408 and a close on a reused connection, a close or a
    reset on a reused connection before any answer, a close after the answer; chosen
    in turn by request (a kind that needs a reused connection waits, on a new one, for
    the next request), so every kind comes up many times whatever the connections'
    order."""

    KINDS = ("interim", "408", "close-unanswered", "reset-unanswered", "close-after", "plain")

    def __init__(self) -> None:
        self.count = 0
        self.seen: dict[str, int] = dict.fromkeys(self.KINDS, 0)
        self._lock = threading.Lock()  # the peer serves each connection on its own thread

    def __call__(self, request: ScriptedRequest) -> Reply:
        with self._lock:
            kind = self.KINDS[self.count % len(self.KINDS)]
            if request.on_connection == 0 and kind in (
                "408",
                "close-unanswered",
                "reset-unanswered",
            ):
                kind = "interim"  # only a reused connection may lose a request unseen
            else:
                self.count += 1
            self.seen[kind] += 1
        final = answer(200, search_answer(marker_of(request)), JSON_HEADERS)
        if kind == "interim":
            return Reply([interim(100, "Continue"), interim(103, "Early Hints"), final])
        if kind == "408":
            return Reply([answer(408, b"", [("Connection", "close")])], then="close")
        if kind == "close-unanswered":
            return Reply(then="close")
        if kind == "reset-unanswered":
            return Reply(then="reset")
        if kind == "close-after":
            return Reply([final], then="close")
        return Reply([final])


@pytest.mark.parametrize("engine", ENGINES)
async def test_interleaved_recalls_through_interim_408_and_close_races_each_get_their_own_answer(
    engine: str,
) -> None:
    script = RacingScript()
    markers = [f"query-{i:03d}" for i in range(120)]
    with ScriptedPeer(script) as peer:
        async with lucene_client(engine, peer, pool_maxsize=6) as client:
            gate = asyncio.Semaphore(12)  # more callers than connections: reuse is constant

            async def one(marker: str) -> str:
                async with gate:
                    return await search(client, marker)

            got = await asyncio.gather(*(one(m) for m in markers))
    assert got == markers  # each caller holds the answer to its own query, none other
    assert all(n >= 5 for n in script.seen.values()), script.seen  # every race ran
    answered = {marker_of(r) for r in peer.requests}
    assert answered == set(markers)
