"""Several nodes behind one store: a node that hangs or is gone costs neither readiness nor
the deadline, and the connection keys that choose sniffing are checked.

The real clients talk to loopback peers of this test: one that answers cluster health as
a node would, one that accepts and never answers (a stopped node), a closed port (a dead
node). The three-node engine cluster itself is tests/connectors/test_cluster_failover.py.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from pydantic import ValidationError

from connectors.lucene.connector import LuceneConnector
from connectors.retry import deadline_scope
from gateway.config import GatewayConfig
from tests.connectors.specs import spec_of
from tests.support.http_peer import PeerReply, PeerRequest, StartPeer

HEALTH = {"cluster_name": "c", "status": "green", "number_of_nodes": 2, "timed_out": False}
ES_PRODUCT = {"x-elastic-product": "Elasticsearch"}


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def healthy(request: PeerRequest) -> PeerReply:
    return PeerReply.json(HEALTH, headers=ES_PRODUCT)


def hangs(request: PeerRequest) -> PeerReply:
    return PeerReply(hang=True)


def connector(backend: str, hosts: list[str], **connection: Any) -> LuceneConnector:
    spec = spec_of(
        {
            "backend": backend,
            "index": "a2m-test-failover",
            "connection": {"hosts": hosts, **connection},
            "mapping": {"content": "text"},
            "search": {"text_fields": ["text"]},
        }
    )
    return LuceneConnector(spec)


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])
async def test_ping_asks_another_node_when_one_hangs_or_is_gone(
    backend: str, http_peer: StartPeer
) -> None:
    up, stuck = http_peer(healthy), http_peer(hangs)
    conn = connector(backend, [stuck.url, closed_port_url(), up.url])
    await conn.connect()
    try:
        # The clients start on a random node: every one gets its turn. One try on the
        # node that hangs would spend all of ping's 5 s there and answer False.
        for _ in range(4):
            assert await conn.ping()
    finally:
        await conn.close()
    assert stuck.requests, "the node that hangs was never asked: nothing failed over"


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])
async def test_ping_is_the_store_index_health(backend: str, http_peer: StartPeer) -> None:
    """Up means the index can serve: red (shards unassigned after a restart) and 429 are
    not up; a missing index (408) and other 4xx are (the search gets its own error)."""
    answers = {
        "green": PeerReply.json(HEALTH, headers=ES_PRODUCT),
        "yellow": PeerReply.json({**HEALTH, "status": "yellow"}, headers=ES_PRODUCT),
        "red": PeerReply.json({**HEALTH, "status": "red"}, headers=ES_PRODUCT),
        "shedding": PeerReply.json({"error": "busy"}, status=429, headers=ES_PRODUCT),
        "missing": PeerReply.json(
            {**HEALTH, "status": "red", "timed_out": True}, status=408, headers=ES_PRODUCT
        ),
        "forbidden": PeerReply.json({"error": "no"}, status=403, headers=ES_PRODUCT),
    }
    expected = {
        "green": True,
        "yellow": True,
        "red": False,
        "shedding": False,
        "missing": True,
        "forbidden": True,
    }
    for name, answer in answers.items():
        peer = http_peer(lambda request, answer=answer: answer)  # type: ignore[misc]
        conn = connector(backend, [peer.url], retries=0)
        await conn.connect()
        try:
            assert await conn.ping() is expected[name], name
        finally:
            await conn.close()
        asked = [r for r in peer.requests if r.path.startswith("/_cluster/health")]
        assert asked, name
        assert asked[-1].path.startswith("/_cluster/health/a2m-test-failover?"), asked[-1].path
        assert "timeout=0s" in asked[-1].path
        assert "local=true" in asked[-1].path


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])
async def test_a_hung_node_leaves_half_the_deadline_for_another(
    backend: str, http_peer: StartPeer
) -> None:
    conn = connector(backend, [http_peer(hangs).url, http_peer(healthy).url])
    single = connector(backend, [http_peer(healthy).url])
    async with deadline_scope(4.0):
        assert conn._engine.call_timeout() <= 2.0
        assert single._engine.call_timeout() > 3.5  # one node: nobody else to leave time for


def test_sniffing_is_off_by_default_and_refused_where_the_nodes_are_hidden() -> None:
    base = {"index": "i", "mapping": {"content": "text"}, "search": {"text_fields": ["t"]}}

    def validate(backend: str, connection: dict[str, Any]) -> Any:
        store = {**base, "backend": backend, "connection": connection}
        return GatewayConfig.model_validate({"stores": {"s": store}}).stores["s"].connection

    assert validate("opensearch", {"hosts": ["http://a:9200"]}).sniff is False
    assert validate("opensearch", {"hosts": ["http://a:9200"], "sniff": True}).sniff is True
    with pytest.raises(ValidationError, match=r"connection\.sniff"):
        validate("elasticsearch", {"cloud_id": "x:eA==", "sniff": True})
    with pytest.raises(ValidationError, match=r"connection\.sniff"):
        validate(
            "opensearch",
            {"hosts": ["https://a:443"], "aws_sigv4": {"region": "eu-west-1"}, "sniff": True},
        )


NODE_LOST = {
    "error": {
        "type": "search_phase_execution_exception",
        "reason": "all shards failed",
        "root_cause": [{"type": "node_disconnected_exception", "reason": "[c2] disconnected"}],
        "failed_shards": [{"reason": {"type": "node_disconnected_exception"}}],
    },
    "status": 500,
}
PARTIAL = {
    "took": 436,
    "timed_out": False,
    "_shards": {
        "total": 2,
        "successful": 1,
        "skipped": 0,
        "failed": 1,
        "failures": [
            {
                "shard": 1,
                "index": "a2m-test-failover",
                "node": "9bkM8tpsRMOGuUxSHzBqMw",
                "reason": {
                    "type": "node_disconnected_exception",
                    "reason": "[c1][indices:data/read/search[phase/fetch/id]] disconnected",
                },
            }
        ],
    },
    "hits": {"total": {"value": 5163, "relation": "eq"}, "max_score": 24.6, "hits": []},
}
EMPTY_HITS = {
    "took": 1,
    "timed_out": False,
    "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
    "hits": {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []},
}


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])
async def test_shards_lost_with_a_node_are_read_again_and_other_500s_are_not(
    backend: str, http_peer: StartPeer
) -> None:
    """A node leaving the cluster mid-search makes the coordinating node answer 500 (every
    shard lost) or 200 with failed shards (some lost), with a transport cause; the replica
    copies answer the second attempt. A 500 for any other cause is the engine's fault and
    is not repeated."""
    from connectors.errors import EngineUnavailable

    query = {"query": {"match": {"text": "cell"}}, "size": 5}

    def once(first: dict[str, Any], status: int = 500) -> Any:
        searches: list[PeerRequest] = []

        def handler(request: PeerRequest) -> PeerReply:
            if "_search" not in request.path:
                return PeerReply.json(HEALTH, headers=ES_PRODUCT)
            searches.append(request)
            if len(searches) == 1:
                return PeerReply.json(first, status=status, headers=ES_PRODUCT)
            return PeerReply.json(EMPTY_HITS, headers=ES_PRODUCT)

        return handler, searches

    async def read(handler: Any) -> Any:
        conn = connector(backend, [http_peer(handler).url], retries=1)
        await conn.connect()
        try:
            return await conn._engine.read_call("POST", "/a2m-test-failover/_search", body=query)
        finally:
            await conn.close()

    lost, lost_searches = once(NODE_LOST)
    assert (await read(lost))["hits"]["hits"] == []
    assert len(lost_searches) == 2

    # The same loss in the fetch phase of one shard of two: a 200 short of that shard's hits.
    partial, partial_searches = once(PARTIAL, status=200)
    assert (await read(partial))["_shards"]["failed"] == 0
    assert len(partial_searches) == 2

    other = {"error": {"type": "illegal_state_exception", "reason": "x"}, "status": 500}
    broken, broken_searches = once(other)
    with pytest.raises(EngineUnavailable):
        await read(broken)
    assert len(broken_searches) == 1
