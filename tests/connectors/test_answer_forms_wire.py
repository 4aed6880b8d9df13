"""More wire forms of an engine's answer, through both Lucene connectors on real sockets.

Where test_answer_forms.py tries the codings, interim answers and bodies ended by the
close, this file tries how the length, the chunks, the status line, the header fields
and the content type may be written, what a connection may be told about its reuse, and
the answers that are not what was asked for: each legal form is every request's own
answer, each other one a connector error saying what came back, never the caller's
refusal.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from email.utils import formatdate

import pytest

from connectors.errors import (
    ConnectorError,
    EngineAnswerInvalid,
    EngineRejected,
    EngineUnavailable,
)
from tests.connectors.test_answer_forms import (
    ENGINES,
    JSON_HEADERS,
    PAGE,
    lucene_client,
    marker_of,
    search,
)
from tests.support.scripted_peer import (
    Reply,
    ScriptedPeer,
    ScriptedRequest,
    answer,
    chunked,
    interim,
    search_answer,
    status_line,
)

JSON_LINES = b"Content-Type: application/json\r\nX-Elastic-Product: Elasticsearch\r\n"


def _head(fields: bytes, body: bytes, status: bytes = b"HTTP/1.1 200 OK") -> bytes:
    """An answer whose header fields (after the two an engine sends) are ``fields``, as is."""
    return status + b"\r\n" + JSON_LINES + fields + b"\r\n" + body


def _fields(fields: bytes, body: bytes) -> bytes:
    """An answer whose every header field is ``fields``, as is."""
    return b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n" + body


def _typed(content_type: str | None, body: bytes) -> bytes:
    fields = [("X-Elastic-Product", "Elasticsearch")]
    return answer(200, body, fields + ([("Content-Type", content_type)] if content_type else []))


def _apart(data: bytes) -> Reply:
    """``data`` written one byte at a time."""
    return Reply([data[i : i + 1] for i in range(len(data))], pause_s=0.0005)


LEGAL: dict[str, Callable[[bytes], Reply]] = {
    "same-length-in-two-fields": lambda b: Reply(
        [_head(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(b), len(b)), b)]
    ),
    "same-length-listed-twice": lambda b: Reply(
        [_head(b"Content-Length: %d, %d\r\n" % (len(b), len(b)), b)]
    ),
    "chunk-extension-quoted-after-whitespace": lambda b: Reply(
        [
            _head(
                b"Transfer-Encoding: chunked\r\n",
                chunked(b).replace(b"\r\n", b' ;a="x y";b\r\n', 1),
            )
        ]
    ),
    "chunk-sizes-in-capitals-and-leading-zeros": lambda b: Reply(
        [_head(b"Transfer-Encoding: chunked\r\n", b"00%X\r\n%s\r\n000\r\n\r\n" % (len(b), b))]
    ),
    "status-line-with-an-empty-reason": lambda b: Reply(
        [answer(200, b, JSON_HEADERS).replace(b"200 OK", b"200 ", 1)]
    ),
    "status-line-with-a-latin-1-reason": lambda b: Reply(
        [answer(200, b, JSON_HEADERS).replace(b"200 OK", b"200 Tr\xe8s bien", 1)]
    ),
    "a-higher-minor-version": lambda b: Reply(
        [answer(200, b, JSON_HEADERS).replace(b"HTTP/1.1", b"HTTP/1.2", 1)]
    ),
    "names-in-odd-case-no-space-tabs-trailing-whitespace": lambda b: Reply(
        [
            _fields(
                b"CONTENT-type:application/json \t\r\nx-ELASTIC-product:\tElasticsearch  \r\n"
                b"content-LENGTH: %d \r\n" % len(b),
                b,
            )
        ]
    ),
    "thousands-of-header-fields": lambda b: Reply(
        [answer(200, b, [*JSON_HEADERS, *((f"X-F{i}", "v") for i in range(3000))])]
    ),
    "codings-in-two-fields": lambda b: Reply(
        [
            answer(
                200,
                gzip.compress(b),
                [*JSON_HEADERS, ("Content-Encoding", "gzip"), ("Content-Encoding", "identity")],
            )
        ]
    ),
    "gzip-twice": lambda b: Reply(
        [
            answer(
                200,
                gzip.compress(gzip.compress(b)),
                [*JSON_HEADERS, ("Content-Encoding", "gzip, gzip")],
            )
        ]
    ),
    "an-unknown-1xx": lambda b: Reply(
        [interim(104, "Upload Resumption Supported"), answer(200, b, JSON_HEADERS)]
    ),
    "a-1xx-claiming-a-body": lambda b: Reply(
        [
            interim(199, "Misc", "Content-Length: 5", "Transfer-Encoding: chunked")
            + answer(200, b, JSON_HEADERS)
        ]
    ),
    "gzip-chunked-byte-by-byte": lambda b: _apart(
        _head(
            b"Transfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n", chunked(gzip.compress(b))
        )
    ),
    "json-with-a-charset": lambda b: Reply([_typed("application/json; charset=UTF-8", b)]),
    "json-as-elasticsearch-vnd-type": lambda b: Reply(
        [_typed("application/vnd.elasticsearch+json; compatible-with=8", b)]
    ),
    "json-type-in-capitals": lambda b: Reply([_typed("Application/JSON", b)]),
    "json-without-a-content-type": lambda b: Reply([_typed(None, b)]),
    "json-labelled-text-plain": lambda b: Reply([_typed("text/plain; charset=utf-8", b)]),
    "json-after-a-byte-order-mark": lambda b: Reply(
        [answer(200, b"\xef\xbb\xbf" + b, JSON_HEADERS)]
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
    assert peer.accepted == 1  # every one of these leaves the connection fit for reuse


REUSE: dict[str, tuple[Callable[[bytes], Reply], int]] = {
    "http-1.0-keep-alive": (
        lambda b: Reply(
            [answer(200, b, [*JSON_HEADERS, ("Connection", "keep-alive")], version="1.0")]
        ),
        1,
    ),
    "http-1.0-length-then-the-close": (
        lambda b: Reply([answer(200, b, JSON_HEADERS, version="1.0")], then="close"),
        3,
    ),
    "close-in-a-token-list-server-keeps-open": (
        lambda b: Reply([answer(200, b, [*JSON_HEADERS, ("Connection", "Keep-Alive, CLOSE")])]),
        3,
    ),
    "keep-alive-answer-then-the-close": (
        lambda b: Reply([answer(200, b, JSON_HEADERS)], then="close"),
        3,
    ),
    "keep-alive-answer-then-a-reset": (
        lambda b: Reply([answer(200, b, JSON_HEADERS)], then="reset"),
        3,
    ),
    "chunked-with-a-content-length-too": (
        lambda b: Reply(
            [_head(b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", chunked(b))]
        ),
        3,
    ),
}


@pytest.mark.parametrize("form", list(REUSE))
@pytest.mark.parametrize("engine", ENGINES)
async def test_a_connection_is_reused_only_when_its_answer_allows(engine: str, form: str) -> None:
    make, connections = REUSE[form]

    def script(request: ScriptedRequest) -> Reply:
        return make(search_answer(marker_of(request)))

    with ScriptedPeer(script) as peer:
        async with lucene_client(engine, peer) as client:
            got = [await search(client, marker) for marker in ("first", "second", "third")]
    assert got == ["first", "second", "third"]
    assert peer.accepted == connections
    assert [(r.connection, r.on_connection) for r in peer.requests] == [
        (i if connections == 3 else 0, 0 if connections == 3 else i) for i in range(3)
    ]


def _cut(then: str) -> Reply:
    return Reply([answer(200, search_answer("x"), JSON_HEADERS)[:-10]], then=then)  # type: ignore[arg-type]


BAD: dict[str, tuple[Reply, type[ConnectorError], str]] = {
    "two-different-lengths": (
        Reply([_head(b"Content-Length: 5\r\nContent-Length: 6\r\n", b"{}   ")]),
        EngineAnswerInvalid,
        "gives two different lengths (Content-Length)",
    ),
    "two-different-lengths-listed": (
        Reply([_head(b"Content-Length: 5, 6\r\n", b"{}   ")]),
        EngineAnswerInvalid,
        "gives two different lengths (Content-Length)",
    ),
    "a-signed-length": (
        Reply([_head(b"Content-Length: +2\r\n", b"{}")]),
        EngineAnswerInvalid,
        "not valid HTTP/1.1 (Invalid character in Content-Length)",
    ),
    "a-coding-not-offered": (
        Reply([answer(200, b"(\xb5/\xfd{}", [*JSON_HEADERS, ("Content-Encoding", "zstd")])]),
        EngineAnswerInvalid,
        "content coding zstd, not gzip or deflate",
    ),
    "no-content": (
        Reply([status_line(204, "No Content") + b"\r\n"]),
        EngineAnswerInvalid,
        "answered 204 with an empty body",
    ),
    "not-modified": (
        Reply([status_line(304, "Not Modified") + b"Content-Length: 50\r\n\r\n"]),
        EngineAnswerInvalid,
        "answered 304 Not Modified, which no engine sends",
    ),
    "permanent-redirect": (
        Reply([answer(308, b"", [("Location", "/elsewhere")])]),
        EngineAnswerInvalid,
        "answered 308, a redirect to another address, which the gateway does not follow",
    ),
    "proxy-sign-in-401": (
        Reply([answer(401, PAGE, [("Content-Type", "text/html"), ("WWW-Authenticate", "Basic")])]),
        EngineAnswerInvalid,
        "answered 401 with text/html, not an engine's error: is a login page or proxy",
    ),
    "proxy-refusal-403": (
        Reply([answer(403, PAGE, [("Content-Type", "text/html; charset=utf-8")])]),
        EngineAnswerInvalid,
        "answered 403 with text/html, not an engine's error",
    ),
    "proxy-bad-request-400": (
        Reply([answer(400, PAGE, [("Content-Type", "text/html")])]),
        EngineAnswerInvalid,
        "answered 400 with text/html, not an engine's error",
    ),
    "closed-mid-body": (_cut("close"), EngineUnavailable, "the engine cannot be reached"),
    "reset-mid-body": (_cut("reset"), EngineUnavailable, "the engine cannot be reached"),
}


@pytest.mark.parametrize("form", list(BAD))
@pytest.mark.parametrize("engine", ENGINES)
async def test_an_answer_that_is_not_what_was_asked_for_is_a_connector_error_saying_so(
    engine: str, form: str
) -> None:
    reply, error, says = BAD[form]
    with ScriptedPeer(lambda request: reply) as peer:
        async with lucene_client(engine, peer) as client:
            with pytest.raises(ConnectorError) as raised:
                await search(client, "q")
    assert type(raised.value) is error
    assert not isinstance(raised.value, EngineRejected)  # never the caller's refusal
    assert says in str(raised.value)
    assert str(peer.port) not in str(raised.value)


@pytest.mark.parametrize("engine", ENGINES)
async def test_an_answer_cut_mid_body_is_asked_again_and_each_gets_its_own(engine: str) -> None:
    def script(request: ScriptedRequest) -> Reply:
        full = answer(200, search_answer(marker_of(request)), JSON_HEADERS)
        if request.connection == 0:
            return Reply([full[:-10]], then="reset")
        return Reply([full])

    with ScriptedPeer(script) as peer:
        async with lucene_client(engine, peer, retries=2) as client:
            got = [await search(client, marker) for marker in ("first", "second")]
    assert got == ["first", "second"]
    assert [(r.connection, marker_of(r)) for r in peer.requests] == [
        (0, "first"),
        (1, "first"),
        (1, "second"),
    ]


def _busy(status: int, retry_after: str, page: bool = False) -> Reply:
    kind = "text/html" if page else "application/json"
    fields = [("Content-Type", kind), ("Retry-After", retry_after)]
    body = b"<html><h1>busy</h1></html>" if page else b'{"error":{"type":"busy"},"status":%d}'
    return Reply([answer(status, body if page else body % status, fields)])


@pytest.mark.parametrize(
    ("status", "retry_after", "low", "high"),
    [
        (429, "7", 7000, 7000),
        (429, "date+9", 7500, 9000),
        (503, "date+9", 7500, 9000),
        (503, "Sun, 06 Nov 1994 08:49:37 GMT", 0, 0),
    ],
    ids=["429-seconds", "429-http-date", "503-http-date", "503-http-date-past"],
)
@pytest.mark.parametrize("engine", ENGINES)
async def test_a_busy_answer_s_retry_after_is_kept_in_seconds_or_as_a_date(
    engine: str, status: int, retry_after: str, low: int, high: int
) -> None:
    if retry_after == "date+9":
        retry_after = formatdate(time.time() + 9, usegmt=True)
    with ScriptedPeer(lambda request: _busy(status, retry_after)) as peer:
        async with lucene_client(engine, peer) as client:
            with pytest.raises(EngineUnavailable) as raised:
                await search(client, "q")
    assert type(raised.value) is EngineUnavailable
    assert low <= raised.value.retry_after_ms <= high


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("engine", ENGINES)
async def test_a_proxy_s_busy_page_keeps_its_retry_after(engine: str, status: int) -> None:
    with ScriptedPeer(lambda request: _busy(status, "4", page=True)) as peer:
        async with lucene_client(engine, peer) as client:
            with pytest.raises(EngineUnavailable) as raised:
                await search(client, "q")
    assert raised.value.retry_after_ms == 4000
