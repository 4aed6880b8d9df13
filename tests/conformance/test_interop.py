"""Interoperability: the flows a canonical client and its framework adapters run, written
from the canonical text (tests/support/canonical_client.py), over HTTP and stdio against
every conformance store (the embedded demo on Qdrant, Elasticsearch, OpenSearch).

These are the calls that failed before the gateway spoke canonical A2M 0.1: timeline with
`limit: 0`, prompt with `auto` / `cite` / a character `budget`, and a write whose -32004
a client must not retry.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.conformance.conftest import PROTOCOL, A2MClient, Corpus, HttpClient, Reply, as_fetched
from tests.support.canonical_client import A2MError, CanonicalClient, Exchange
from tests.support.wire import assert_response

pytestmark = pytest.mark.integration

QUERY = "how are records ordered in a timeline"


def exchange_for(client: A2MClient) -> Exchange:
    """The conformance transport as the canonical client's; every response schema-checked."""

    def send(message: dict[str, Any]) -> dict[str, Any]:
        if isinstance(client, HttpClient):
            # §8.3.2: a canonical HTTP client sends the version header on every POST.
            r = client.post(orjson.dumps(message), headers={"A2M-Protocol-Version": PROTOCOL})
            assert r.status_code == 200, r.status_code
            reply = Reply("http", r.content, r.status_code, dict(r.headers))
        else:
            reply = client.send_json(message)
        response = reply.response()
        assert_response(response, message["method"], f"interop-{client.transport}")
        return response

    return send


@pytest.fixture
def canonical(client: A2MClient) -> CanonicalClient:
    return CanonicalClient(exchange_for(client))


def test_describe_first_and_prompt_offered(canonical: CanonicalClient) -> None:
    assert canonical.attempts == ["memory/describe"]
    assert canonical.profile["protocol"] == PROTOCOL
    assert canonical.supports("prompt")
    assert "auto" in canonical.profile["prompt"]["styles"], "§4.16: servers MUST support auto"


def test_timeline_limit_zero_replays_the_store(canonical: CanonicalClient, corpus: Corpus) -> None:
    records = canonical.timeline()["records"]  # the reference client's default: limit 0
    assert len(records) > 10, "limit 0 means as many as the store allows, not none"
    assert records == corpus.records, "limit 0 reads as limit max_recall_limit"
    stamps = [r["created_at"] for r in records]
    assert stamps == sorted(stamps), "timeline ascends by created_at"
    assert canonical.timeline(limit=3)["records"] == records[-3:], "limit keeps the newest"


def test_recall_limit_zero_is_bounded_by_the_store(canonical: CanonicalClient) -> None:
    top = canonical.profile["limits"]["max_recall_limit"]
    records = canonical.recall(QUERY, limit=0)["records"]
    assert 5 < len(records) <= top
    assert canonical.recall(QUERY)["records"] == records[:5], "the same ranking, truncated"


def test_recall_then_fetch_by_key(canonical: CanonicalClient, corpus: Corpus) -> None:
    assert canonical.supports("keys")
    hits = canonical.recall(QUERY, limit=8)["records"]
    keyed = [r for r in hits if r.get("key")]
    assert keyed, "the demo corpus keys its records"
    by_key: dict[str, list[dict[str, Any]]] = {}
    for r in corpus.records:
        by_key.setdefault(r.get("key") or "", []).append(r)
    for hit in keyed:
        record = canonical.fetch(hit["key"])
        assert record is not None, hit["key"]
        assert record["key"] == hit["key"]
        assert "score" not in record
        if len(by_key[hit["key"]]) == 1:
            assert record == as_fetched(hit, record)
    assert canonical.fetch("no/such/key/at/all") is None


def test_prompt_auto_cite_and_budget(canonical: CanonicalClient) -> None:
    plain = canonical.recall(QUERY, limit=8)
    full = canonical.recall(QUERY, limit=8, prompt={"style": "auto", "cite": True})
    assert full["records"] == plain["records"], "asking for text changed the records"
    assert plain["records"], "nothing to render"
    lines = full["prompt"].split("\n")
    assert len(lines) == len(full["records"]) == len(full["prompt_ids"])
    # The demo's records carry no conversation roles: auto renders facts.
    assert all(line.startswith("- ") for line in lines), lines[:2]
    for line, record in zip(lines, full["records"], strict=True):
        source = record.get("uri") or record.get("key")
        assert source
        assert line.endswith(f"[{source}]"), (line[-80:], source)

    budget = len(lines[0]) + 1 + len(lines[1])
    trimmed = canonical.recall(
        QUERY, limit=8, prompt={"style": "auto", "cite": True, "budget": budget}
    )
    assert trimmed["records"] == plain["records"]
    assert trimmed["prompt_ids"] == full["prompt_ids"][:2]
    assert trimmed["prompt"] == "\n".join(lines[:2]), "whole records, none cut"
    # A 120-character budget is at most 120 characters.
    assert len(canonical.recall(QUERY, prompt={"budget": 120})["prompt"]) <= 120
    assert "prompt" not in canonical.recall(QUERY, prompt={"method": "none"})


def test_read_only_is_not_retried(canonical: CanonicalClient) -> None:
    with pytest.raises(A2MError) as info:
        canonical.remember("the deploy key rotates every 90 days", role="user")
    assert info.value.code == -32004
    assert not info.value.retryable
    assert canonical.attempts.count("memory/remember") == 1


def test_summarize_is_an_undeclared_capability_not_retried(canonical: CanonicalClient) -> None:
    assert not canonical.supports("summarize")
    with pytest.raises(A2MError) as info:
        canonical._call("memory/summarize", {"ids": ["x"]})
    assert info.value.code == -32003
    assert canonical.attempts.count("memory/summarize") == 1


def test_the_client_does_retry_engine_trouble() -> None:
    """Control: the no-retry checks above would be vacuous if the client never retried."""
    waits: list[float] = []
    replies: list[dict[str, Any]] = [
        {"result": {"protocol": PROTOCOL, "capabilities": ["core"]}},
        {
            "error": {
                "code": -32603,
                "message": "engine down",
                "data": {
                    "reason": "engine_unavailable",
                    "retryable": True,
                    "retry_after_ms": 250,
                },
            }
        },
        {"result": {"records": []}},
    ]
    answers = iter(replies)

    def exchange(message: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": message["id"], **next(answers)}

    client = CanonicalClient(exchange, wait=waits.append)
    assert client.timeline() == {"records": []}
    assert client.attempts == ["memory/describe", "memory/timeline", "memory/timeline"]
    assert waits == [0.25]
