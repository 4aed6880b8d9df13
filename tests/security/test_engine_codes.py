"""Deterministic refusals get deterministic codes, on the real engines.

A key_prefix inside the documented limit but past what the engines match, and a
query with more terms than OpenSearch's clause limit, are the caller's to fix:
INVALID_PARAMS, sent once, never "unavailable, retry". A missing index is the
operator's: INTERNAL_ERROR with a reason, and a log line that names the problem.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from connectors.errors import EngineUnavailable, QueryTooLarge
from connectors.lucene.failures import EngineFailure, error_causes
from gateway.a2m.errors import ErrorCode
from tests.security.acl_corpus import ROUTING_INDEX, acl_subset, collision_store, load_collisions
from tests.security.acl_corpus import load_index as load_acl_index
from tests.security.support import asgi_client, build_gateway, rpc
from tests.support.recording_proxy import recording_proxy
from tests.support.scifact import load_scifact
from tests.support.wire import assert_valid

ENGINES = [
    pytest.param("elasticsearch", marks=[pytest.mark.elasticsearch, pytest.mark.integration]),
    pytest.param("opensearch", marks=[pytest.mark.opensearch, pytest.mark.integration]),
]


def _unscoped(store: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in store.items() if k != "scope"}


async def _call(store: dict[str, Any], method: str, params: dict[str, Any]) -> dict[str, Any]:
    gateway = build_gateway({}, {"s": store}, {})
    await gateway.start(strict=False)
    try:
        async with asgi_client(gateway) as client:
            r = await client.post(
                "/a2m/s",
                content=json.dumps(rpc(method, params)),
                headers={"content-type": "application/json"},
            )
            answer: dict[str, Any] = r.json()
            return answer
    finally:
        await gateway.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_long_key_prefix_is_invalid_params(
    engine: str, request: pytest.FixtureRequest
) -> None:
    url: str = request.getfixturevalue(f"{engine}_url")
    load_collisions(engine, url)  # type: ignore[arg-type]
    store = _unscoped(collision_store(engine, url, ROUTING_INDEX))
    ok = await _call(store, "memory/recall", {"key_prefix": "k" * 1000})
    assert "result" in ok, ok
    for length in (1001, 1024):
        for params in (
            {"key_prefix": "k" * length},
            {"query": "alpha", "key_prefix": "k" * length},
        ):
            answer = await _call(store, "memory/recall", params)
            assert answer["error"]["code"] == ErrorCode.INVALID_PARAMS, (length, answer)
            assert answer["error"]["data"] == {"reason": "query_too_large", "retryable": False}
            assert_valid("error", answer["error"])
        tl = await _call(store, "memory/timeline", {"key_prefix": "k" * length})
        assert tl["error"]["code"] == ErrorCode.INVALID_PARAMS


@pytest.mark.opensearch
@pytest.mark.integration
async def test_too_many_terms_on_opensearch_is_invalid_params_sent_once(
    opensearch_url: str, scifact_dir: Path
) -> None:
    from tests.security.acl_corpus import lucene_store

    sf = load_scifact(scifact_dir)
    _, doc_ids = acl_subset(sf)
    index = load_acl_index("opensearch", opensearch_url, sf, doc_ids)
    query = " ".join(f"w{i}" for i in range(800))  # inside max_query_length; x2 fields > 1024
    with recording_proxy(opensearch_url) as (proxy_url, seen):
        store = _unscoped(lucene_store("opensearch", proxy_url, index))
        store["connection"]["retries"] = 3
        answer = await _call(store, "memory/recall", {"query": query})
    searches = [r for r in seen if "/_search" in r.path]
    assert answer["error"]["code"] == ErrorCode.INVALID_PARAMS, answer
    assert answer["error"]["data"]["reason"] == "query_too_large"  # the engine's refusal
    assert_valid("error", answer["error"])
    assert "retry_after_ms" not in json.dumps(answer)
    assert len(searches) == 1  # deterministic: not retried


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_missing_index_says_why_to_the_operator(
    engine: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    url: str = request.getfixturevalue(f"{engine}_url")
    store = _unscoped(collision_store(engine, url, "a2m-test-sec-no-such-index"))
    with caplog.at_level(logging.WARNING):
        answer = await _call(store, "memory/recall", {"query": "alpha"})
    assert answer["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert answer["error"]["data"] == {"reason": "index_unusable", "retryable": False}
    assert url.split("//")[1] not in json.dumps(answer)  # no host on the wire
    logged = [r.getMessage() for r in caplog.records]
    assert any("index: the index does not exist in the engine" in m for m in logged), logged


def test_a_too_large_query_is_never_transient_whatever_the_status() -> None:
    body = {
        "error": {
            "type": "search_phase_execution_exception",
            "root_cause": [{"type": "too_many_nested_clauses"}],
            "failed_shards": [{"reason": {"type": "too_many_nested_clauses"}}],
        },
        "status": 500,
    }
    causes = error_causes(body)
    assert "too_many_nested_clauses" in causes
    failure = EngineFailure("status", status=500, causes=causes)
    assert not failure.transient
    assert isinstance(failure.error(), QueryTooLarge)
    plain = EngineFailure("status", status=503, causes=error_causes({"error": {"type": "x"}}))
    assert plain.transient
    assert isinstance(plain.error(), EngineUnavailable)
