"""elastic-transport's node over the gateway's HTTP/1.1 client (lucene/elasticsearch_http.py).

What the library's own aiohttp node does, this one must do too, against a real
loopback server: send the node's and the call's headers and a compressed body; hand
back the status, headers and body in the response meta; raise the library's error
classes for a timeout and a refused connection. The whole client runs over it too.
"""

from __future__ import annotations

import gzip
from typing import Any

import elastic_transport
import pytest
from elastic_transport import ConnectionTimeout, HttpHeaders, NodeConfig

from connectors.lucene.elasticsearch_http import node_class
from tests.connectors.conftest import free_port
from tests.support.http_peer import HttpPeer, PeerReply, PeerRequest, StartPeer

PRODUCT = {"x-elastic-product": "Elasticsearch"}


def _node(peer: HttpPeer | None = None, port: int = 0, **config: Any) -> Any:
    where = int(peer.url.rsplit(":", 1)[1]) if peer is not None else port
    return node_class()(NodeConfig("http", "127.0.0.1", where, **config))


async def test_the_request_carries_the_nodes_and_the_calls_headers(
    http_peer: StartPeer,
) -> None:
    peer = http_peer(lambda request: PeerReply.json({"took": 1}, headers=PRODUCT))
    node = _node(peer, headers={"authorization": "ApiKey abc"})
    answer = await node.perform_request(
        "POST",
        "/idx/_search?size=3",
        body=b'{"query":{}}',
        headers=HttpHeaders({"content-type": "application/json", "traceparent": "00-a"}),
    )
    await node.close()
    assert (answer.meta.status, answer.body) == (200, b'{"took": 1}')
    assert answer.meta.headers["x-elastic-product"] == "Elasticsearch"
    sent = peer.requests[0]
    assert (sent.method, sent.path, sent.body) == ("POST", "/idx/_search?size=3", b'{"query":{}}')
    assert sent.headers["authorization"] == "ApiKey abc"
    assert sent.headers["traceparent"] == "00-a"
    assert sent.headers["content-type"] == "application/json"


async def test_an_error_answer_keeps_its_headers(http_peer: StartPeer) -> None:
    busy = PeerReply.json({"error": "busy"}, status=429, headers={"retry-after": "2"})
    node = _node(http_peer(lambda request: busy))
    answer = await node.perform_request("POST", "/idx/_search", body=b"{}")
    await node.close()
    assert (answer.meta.status, answer.meta.headers["retry-after"]) == (429, "2")


async def test_a_compressed_node_sends_a_gzip_body(http_peer: StartPeer) -> None:
    peer = http_peer(lambda request: PeerReply.json({}, headers=PRODUCT))
    node = _node(peer, http_compress=True)
    await node.perform_request("POST", "/idx/_search", body=b'{"size":1}')
    await node.close()
    assert peer.requests[0].headers["content-encoding"] == "gzip"
    assert gzip.decompress(peer.requests[0].body) == b'{"size":1}'


async def test_a_hung_node_is_a_connection_timeout(http_peer: StartPeer) -> None:
    node = _node(http_peer(lambda request: PeerReply(hang=True)))
    with pytest.raises(ConnectionTimeout):
        await node.perform_request("GET", "/", request_timeout=0.3)
    await node.close()


async def test_a_refused_connection_is_a_connection_error() -> None:
    node = _node(port=free_port())
    with pytest.raises(elastic_transport.ConnectionError) as raised:
        await node.perform_request("GET", "/")
    await node.close()
    assert not isinstance(raised.value, ConnectionTimeout)


async def test_the_client_runs_over_it(http_peer: StartPeer) -> None:
    """The whole client (its transport, product check and serializer) over this node."""
    from elasticsearch import AsyncElasticsearch

    def answer(request: PeerRequest) -> PeerReply:
        return PeerReply.json({"hits": {"hits": [{"_id": "a", "_score": 1.0}]}}, headers=PRODUCT)

    peer = http_peer(answer)
    client = AsyncElasticsearch(hosts=[peer.url], node_class=node_class())
    found = await client.search(index="idx", query={"match_all": {}})
    await client.close()
    assert found["hits"]["hits"][0]["_id"] == "a"
    assert peer.requests[0].json() == {"query": {"match_all": {}}}
