"""What a proxy in front of a Qdrant server answers instead of it, on real sockets.

The scripted REST double (tests/support/qdrant_wire.py) stands where the server would
be and, for one operation, sends what a sign-on proxy or load balancer sends: a login
page, a body that is not JSON, an empty or still-compressed one, a 502 page, a status
Qdrant never sends, a redirect. Each becomes the connector's retryable error saying in
one sentence what came back; the gateway answers the caller -32603 engine_unavailable,
never -32602, logs the sentence without a traceback, and a store that met it at open
stays registered and opens once the server answers.
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest

from connectors.base import SearchRequest
from connectors.errors import EngineAnswerInvalid
from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.connectors.test_qdrant_wire import connector, store
from tests.support.http_peer import PeerReply
from tests.support.qdrant_wire import WireQdrant, serve_wire

PAGE = b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>"
JSON = {"content-type": "application/json"}
PROXY_FORMS = {
    "login-page": (
        PeerReply(200, PAGE, {"content-type": "text/html; charset=utf-8"}),
        "the engine answered 200 with text/html, not JSON: "
        "is a login page or proxy in front of the engine?",
    ),
    "not-json": (
        PeerReply(200, b"<<not json>>", JSON),
        "the engine answered with a body that is not valid JSON",
    ),
    "empty": (PeerReply(200, b"", JSON), "the engine answered 200 with an empty body, not JSON"),
    "still-compressed": (
        PeerReply(200, gzip.compress(b'{"result": {"points": []}, "status": "ok"}'), JSON),
        "the engine answered 200 with a body still gzip-compressed that its "
        "content-encoding does not declare",
    ),
    "load-balancer-502": (
        PeerReply(502, b"<html><h1>502 Bad Gateway</h1></html>", {"content-type": "text/html"}),
        "the engine's address answered 502 with text/html, not the engine's answer: "
        "is a proxy or load balancer in front of the engine?",
    ),
    "status-never-sent": (
        PeerReply(418, b"short and stout", {"content-type": "text/plain"}),
        "the engine's address answered 418, which no engine sends to this call: "
        "is a proxy in front of the engine?",
    ),
    "redirect": (
        PeerReply(302, b"", {"location": "https://sso.example/login"}),
        "the engine's address answered 302, a redirect to another address, which the gateway "
        "does not follow: "
        "is a login page or proxy in front of the engine?",
    ),
}


@pytest.fixture
def wire() -> Iterator[WireQdrant]:
    yield from serve_wire()


@pytest.mark.parametrize("form", list(PROXY_FORMS))
async def test_a_proxys_answer_to_a_query_says_what_came_back_and_the_next_query_reads(
    wire: WireQdrant, form: str
) -> None:
    reply, says = PROXY_FORMS[form]
    c = connector(wire, "rest", retries=1)
    try:
        await c.open()
        wire.script.replies["query"] = reply
        with pytest.raises(EngineAnswerInvalid) as caught:
            await c.search(SearchRequest(limit=3, text="harbour"))
        asked = wire.script.calls.count("query")
        del wire.script.replies["query"]
        hits = await c.search(SearchRequest(limit=3, text="harbour"))  # same pool, next answer
    finally:
        await c.close()
    assert str(caught.value) == says
    assert caught.value.retry_after_ms == 1000
    assert asked == 2  # a try and one retry: a proxy's bad moment may pass
    assert [h.id for h in hits] == ["1", "2", "3"]


@pytest.mark.parametrize("form", ["login-page", "not-json", "load-balancer-502"])
async def test_the_caller_gets_retryable_engine_trouble_and_the_log_the_sentence(
    wire: WireQdrant, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    reply, says = PROXY_FORMS[form]
    gateway = Gateway(parse_config({"stores": {"s": store(wire, "rest", retries=0)}}))
    try:
        client = InProcessClient(gateway.dispatcher())
        await client.call("memory/recall", {"query": "harbour"})  # opens the store: a control
        wire.script.replies["query"] = reply
        with caplog.at_level(logging.DEBUG), pytest.raises(A2MRemoteError) as caught:
            await client.call("memory/recall", {"query": "harbour"})
    finally:
        await gateway.close()
    err = caught.value
    assert err.code == -32603
    assert err.data is not None
    assert (err.data["reason"], err.data["retryable"]) == ("engine_unavailable", True)
    said = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and says in r.getMessage()
    ]
    assert said == [f"the engine's answer was not usable: {says}"]  # once, at the boundary
    assert all(r.exc_info is None for r in caplog.records)
    assert "127.0.0.1" not in str(err)


async def test_a_store_that_met_a_login_page_at_start_stays_registered_and_opens_later(
    wire: WireQdrant, caplog: pytest.LogCaptureFixture
) -> None:
    reply, says = PROXY_FORMS["login-page"]
    wire.script.replies["collection"] = reply
    gateway = Gateway(parse_config({"stores": {"s": store(wire, "rest", retries=0)}}))
    try:
        with caplog.at_level(logging.WARNING):
            await gateway.start(strict=False)  # what `serve` does
        assert await gateway.ready() == {"s": False}
        client = InProcessClient(gateway.dispatcher())
        with pytest.raises(A2MRemoteError) as caught:
            await client.call("memory/recall", {"query": "harbour"})
        del wire.script.replies["collection"]  # the proxy lets the server through
        answer = await client.call("memory/recall", {"query": "harbour"})
        assert await gateway.ready() == {"s": True}
    finally:
        await gateway.close()
    assert caught.value.code == -32603
    assert caught.value.data is not None
    assert caught.value.data["reason"] == "engine_unavailable"
    assert len(answer["records"]) == 3
    started = [r.getMessage() for r in caplog.records if r.name == "gateway.runtime"]
    assert started == [f"store s not ready yet: {says}"]
    assert all(r.exc_info is None for r in caplog.records)


BUSY_PAGE = b"<html><h1>429 Too Many Requests</h1></html>"


@pytest.mark.parametrize(
    ("status", "retry_after", "low", "high"),
    [(429, "3", 3000, 3000), (503, "date+9", 7500, 9000)],
    ids=["429-seconds", "503-http-date"],
)
async def test_a_proxys_busy_page_keeps_the_wait_it_asked_for(
    wire: WireQdrant, status: int, retry_after: str, low: int, high: int
) -> None:
    if retry_after == "date+9":
        retry_after = formatdate(time.time() + 9, usegmt=True)
    headers = {"content-type": "text/html", "retry-after": retry_after}
    c = connector(wire, "rest", retries=0)
    try:
        await c.open()
        wire.script.replies["query"] = PeerReply(status, BUSY_PAGE, headers)
        with pytest.raises(EngineAnswerInvalid) as caught:
            await c.search(SearchRequest(limit=3, text="harbour"))
    finally:
        await c.close()
    assert str(caught.value).startswith(f"the engine's address answered {status} with text/html")
    assert low <= caught.value.retry_after_ms <= high
