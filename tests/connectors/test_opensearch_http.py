"""opensearch-py's connection over the gateway's HTTP/1.1 client (lucene/opensearch_http.py).

What the library's own aiohttp connection does, this one must do too, against a real
loopback server: send the client's headers, auth, query string and compressed body;
raise the library's error classes (a timeout, a refused connection, an error status
with its body); keep a busy node's ``Retry-After``.
"""

from __future__ import annotations

import gzip
from typing import Any

import opensearchpy
import orjson
import pytest
from opensearchpy.exceptions import ConnectionError as ClientConnectionError
from opensearchpy.exceptions import ConnectionTimeout, NotFoundError, TransportError

from connectors.http_answer import AnswerText
from connectors.lucene.opensearch import OrjsonSerializer
from connectors.lucene.opensearch_http import connection_class
from tests.connectors.conftest import free_port
from tests.support.http_peer import HttpPeer, PeerReply, PeerRequest, StartPeer

OK = PeerReply.json({"acknowledged": True})


def _connection(peer: HttpPeer | None = None, port: int = 0, **options: Any) -> Any:
    cls = connection_class()
    where = int(peer.url.rsplit(":", 1)[1]) if peer is not None else port
    return cls(host="127.0.0.1", port=where, **options)


async def test_the_request_carries_the_clients_headers_auth_and_query(
    http_peer: StartPeer,
) -> None:
    peer = http_peer(lambda request: OK)
    conn = _connection(peer, http_auth=("reader", "s3cret"), headers={"x-tenant": "t1"})
    status, headers, raw = await conn.perform_request(
        "POST", "/idx/_search", {"size": "3"}, b'{"query":{}}', headers={"traceparent": "00-a"}
    )
    await conn.close()
    assert (status, raw) == (200, '{"acknowledged": true}')
    assert headers["content-type"] == "application/json"
    sent = peer.requests[0]
    assert (sent.method, sent.path, sent.body) == ("POST", "/idx/_search?size=3", b'{"query":{}}')
    assert sent.headers["authorization"] == "Basic cmVhZGVyOnMzY3JldA=="
    assert sent.headers["x-tenant"] == "t1"
    assert sent.headers["traceparent"] == "00-a"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["user-agent"].startswith("opensearch-py/")
    assert sent.headers["host"] == f"127.0.0.1:{peer.url.rsplit(':', 1)[1]}"


async def test_a_compressed_client_sends_a_gzip_body(http_peer: StartPeer) -> None:
    peer = http_peer(lambda request: OK)
    conn = _connection(peer, http_compress=True)
    await conn.perform_request("POST", "/idx/_search", body=b'{"size":1}')
    await conn.close()
    sent = peer.requests[0]
    assert sent.headers["content-encoding"] == "gzip"
    assert gzip.decompress(sent.body) == b'{"size":1}'


async def test_a_success_is_text_that_keeps_its_bytes_for_the_serializer(
    http_peer: StartPeer,
) -> None:
    answer = {"hits": {"hits": [{"_id": "1", "_source": {"text": "β-cell Ångström"}}]}}
    utf8 = PeerReply(200, orjson.dumps(answer), {"content-type": "application/json"})
    conn = _connection(http_peer(lambda request: utf8))
    _, _, raw = await conn.perform_request("POST", "/idx/_search", body=b"{}")
    await conn.close()
    assert isinstance(raw, AnswerText)
    assert raw == raw.body.decode("utf-8")
    assert orjson.loads(raw.body) == answer
    assert OrjsonSerializer().loads(raw) == answer


async def test_an_error_status_raises_the_librarys_class_with_the_engines_body(
    http_peer: StartPeer,
) -> None:
    missing = {"error": {"type": "index_not_found_exception"}, "status": 404}
    peer = http_peer(lambda request: PeerReply.json(missing, status=404))
    conn = _connection(peer)
    with pytest.raises(NotFoundError) as raised:
        await conn.perform_request("GET", "/gone/_search")
    await conn.close()
    assert raised.value.error == "index_not_found_exception"
    assert raised.value.info == missing


async def test_a_busy_nodes_retry_after_is_kept(http_peer: StartPeer) -> None:
    busy = PeerReply.json({"error": "busy"}, status=429, headers={"retry-after": "3"})
    conn = _connection(http_peer(lambda request: busy))
    with pytest.raises(TransportError) as raised:
        await conn.perform_request("POST", "/idx/_search", body=b"{}")
    await conn.close()
    assert raised.value.status_code == 429
    assert raised.value.retry_after_ms == 3000  # type: ignore[attr-defined]


async def test_a_status_the_caller_ignores_is_an_answer(http_peer: StartPeer) -> None:
    conn = _connection(http_peer(lambda request: PeerReply.json({}, status=404)))
    status, _, _ = await conn.perform_request("GET", "/idx", ignore=(404,))
    await conn.close()
    assert status == 404


async def test_a_hung_node_is_a_connection_timeout(http_peer: StartPeer) -> None:
    conn = _connection(http_peer(lambda request: PeerReply(hang=True)))
    with pytest.raises(ConnectionTimeout):
        await conn.perform_request("GET", "/", timeout=0.3)
    await conn.close()


async def test_a_refused_connection_is_a_connection_error() -> None:
    conn = _connection(port=free_port())
    with pytest.raises(ClientConnectionError) as raised:
        await conn.perform_request("GET", "/")
    await conn.close()
    assert not isinstance(raised.value, ConnectionTimeout)


async def test_the_client_runs_over_it(http_peer: StartPeer) -> None:
    """The whole client (its transport, serializer and node pool) over this connection."""

    def answer(request: PeerRequest) -> PeerReply:
        return PeerReply.json({"hits": {"hits": [{"_id": "a", "_score": 1.0}]}})

    peer = http_peer(answer)
    client = opensearchpy.AsyncOpenSearch(hosts=[peer.url], connection_class=connection_class())
    answer_body = await client.search(index="idx", body={"query": {"match_all": {}}})
    await client.close()
    assert answer_body["hits"]["hits"][0]["_id"] == "a"
    assert peer.requests[0].json() == {"query": {"match_all": {}}}


async def test_a_signer_signs_each_request_as_sent(http_peer: StartPeer) -> None:
    """A callable ``http_auth`` (SigV4's) is called per request with what goes on the wire:
    the full URL, the body as sent (compressed) and the headers; its headers are sent."""
    peer = http_peer(lambda request: OK)
    calls: list[dict[str, Any]] = []

    def sign(*, method: str, url: str, body: Any, headers: Any) -> dict[str, str]:
        calls.append({"method": method, "url": url, "body": body, "headers": dict(headers)})
        return {"authorization": f"AWS4-HMAC-SHA256 stand-in {len(calls)}", "x-amz-date": "d"}

    conn = _connection(peer, http_auth=sign, http_compress=True)
    for _ in range(2):
        await conn.perform_request("POST", "/idx/_search", {"size": "1"}, b'{"size":1}')
    await conn.close()
    port = peer.url.rsplit(":", 1)[1]
    assert [c["url"] for c in calls] == [f"http://127.0.0.1:{port}/idx/_search?size=1"] * 2
    assert gzip.decompress(calls[0]["body"]) == b'{"size":1}'
    assert calls[0]["headers"]["content-encoding"] == "gzip"
    sent = [r.headers["authorization"] for r in peer.requests]
    assert sent == ["AWS4-HMAC-SHA256 stand-in 1", "AWS4-HMAC-SHA256 stand-in 2"]
    assert peer.requests[0].headers["x-amz-date"] == "d"
