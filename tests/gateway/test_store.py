"""Store semantics that do not depend on an engine's behaviour.

The connector here is a recording stub: it checks what the store asks the
engine for (filters, limits, ordering requests), not how an engine ranks —
ranking and filtering against real engines live in tests/connectors and
tests/conformance.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.base import (
    ID_FIELD,
    Condition,
    Hit,
    TimeWindows,
    VectorInfo,
)
from gateway.a2m.dispatcher import Dispatcher
from gateway.config import parse_config
from gateway.store.store import Store
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.support.memory_connector import MemoryConnector


def make(
    hits: list[Hit] | None = None, vectors: VectorInfo | None = None, **search: Any
) -> tuple[InProcessClient, MemoryConnector]:
    cfg = parse_config(
        {
            "stores": {
                "s": {
                    "backend": "elasticsearch",
                    "index": "i",
                    "connection": {"hosts": ["http://127.0.0.1:1"]},
                    "mapping": {
                        "content": "body",
                        "key": "k",
                        "group": "g",
                        "uri": "u",
                        "created_at": "ts",
                        "metadata": ["lang"],
                    },
                    "search": {"text_fields": ["body"], **search},
                    "limits": {"max_recall_limit": 50},
                }
            }
        }
    )
    conn = MemoryConnector(answers=hits or [], vectors=vectors)
    store = Store("s", cfg.stores["s"], conn)
    return InProcessClient(Dispatcher(store)), conn


def hits(n: int) -> list[Hit]:
    """Best first, scores in [0, 1]: what every connector's search answers (connectors.base)."""
    return [
        Hit(id=str(i), source={"body": f"doc {i}", "ts": f"2026-01-{i + 1:02d}"}, score=1 - i / 100)
        for i in range(n)
    ]


async def code_of(client: InProcessClient, method: str, params: dict[str, Any]) -> int:
    with pytest.raises(A2MRemoteError) as info:
        await client.call(method, params)
    return info.value.code


async def test_describe_is_built_from_the_store() -> None:
    client, _ = make(vectors=VectorInfo(dimensions=3, metric="cosine", metrics=("cosine", "dot")))
    d = await client.call("memory/describe", {"protocol": "a2m/0.1"})
    assert d["read_only"] is True
    assert d["capabilities"] == ["core", "external", "keys", "embeddings", "prompt"]
    assert "memory/fetch" in d["methods"]
    assert "memory/promote" not in d["methods"]
    assert d["embeddings"] == {
        "dimensions": 3,
        "metric": "cosine",
        "metrics": ["cosine", "dot"],
        "model": None,
    }
    assert d["limits"]["max_recall_limit"] == 50
    assert await code_of(client, "memory/describe", {"protocol": "a2m/0.2"}) == -32007
    # owner is a describe param (requires scopes); where scopes is not declared it is ignored.
    assert "scopes" not in d["capabilities"]
    assert (await client.call("memory/describe", {"owner": "alice"}))["name"] == "s"


async def test_where_translates_fields_and_metadata_unknown_matches_nothing() -> None:
    client, conn = make(hits(3))
    await client.call("memory/recall", {"query": "x", "where": {"group": ["a", "b"], "lang": "en"}})
    assert conn.searches[-1].filter.must == (
        Condition("g", ("a", "b")),
        Condition("lang", ("en",)),
    )
    before = len(conn.searches)
    out = await client.call("memory/recall", {"query": "x", "where": {"acl": "admins"}})
    assert out == {"records": []}
    assert len(conn.searches) == before, "an unexposed key must not reach the engine"
    await client.call("memory/recall", {"query": "x", "where": {"id": ["1", "2"]}})
    assert list(conn.searches[-1].filter.must) == [Condition(ID_FIELD, ("1", "2"))]
    assert await code_of(client, "memory/recall", {"where": {"score": 1}}) == -32602


async def test_where_on_content_and_timestamps() -> None:
    client, conn = make(hits(3))
    out = await client.call("memory/recall", {"query": "x", "where": {"content": "doc 1"}})
    assert list(conn.searches[-1].filter.must) == [Condition("body", ("doc 1",), phrase=True)]
    # The stub ignores filters; the store's exact check keeps only equal content.
    assert [r["id"] for r in out["records"]] == ["1"]
    await client.call(
        "memory/timeline", {"where": {"created_at": ["2026-01-02T00:00:00.000Z", "2026-01-03"]}}
    )
    assert conn.ordered_reads[-1].filter.times == (
        TimeWindows(
            "ts",
            (
                ("2026-01-02T00:00:00.000Z", "2026-01-02T00:00:00.001Z"),
                ("2026-01-03T00:00:00.000Z", "2026-01-03T00:00:00.001Z"),
            ),
        ),
    )
    assert await code_of(client, "memory/recall", {"where": {"created_at": "soon"}}) == -32602
    assert await code_of(client, "memory/recall", {"where": {"created_at": 5}}) == -32602
    assert (await client.call("memory/recall", {"where": {"updated_at": "2026-01-01"}})) == {
        "records": []
    }, "updated_at is not mapped: matches nothing"


async def test_limits_are_enforced() -> None:
    client, _ = make(hits(60))
    assert len((await client.call("memory/recall", {"query": "x"}))["records"]) == 10
    assert len((await client.call("memory/recall", {"query": "x", "limit": 50}))["records"]) == 50
    for bad in (51, -1):
        assert await code_of(client, "memory/recall", {"query": "x", "limit": bad}) == -32602
    assert await code_of(client, "memory/recall", {"query": "q" * 5000}) == -32602
    many = {f"k{i}": "v" for i in range(17)}
    assert await code_of(client, "memory/recall", {"where": many}) == -32602
    assert await code_of(client, "memory/recall", {"where": {"lang": ["x"] * 101}}) == -32602


async def test_limit_zero_is_as_many_as_the_store_allows() -> None:
    """docs/protocol.md: the canonical client sends limit 0 to mean "all"."""
    # Newest first, as the connector answers an ordered read with newest_first.
    docs = [
        Hit(id=str(i), source={"body": "x", "ts": f"2026-01-01T{i // 60:02d}:{i % 60:02d}:00Z"})
        for i in reversed(range(60))
    ]
    client, conn = make(docs)
    out = await client.call("memory/recall", {"query": "x", "limit": 0})
    assert len(out["records"]) == 50
    assert conn.searches[-1].limit == 50
    out = await client.call("memory/timeline", {"limit": 0})
    assert conn.ordered_reads[-1].limit == 50
    assert conn.ordered_reads[-1].newest_first, "the newest max_recall_limit records"
    stamps = [r["created_at"] for r in out["records"]]
    assert len(stamps) == 50
    assert stamps == sorted(stamps), "and still ascending"


async def test_scores_kept_descending_and_min_score() -> None:
    client, _ = make(hits(8))
    records = (await client.call("memory/recall", {"query": "x"}))["records"]
    assert len(records) == 8
    scores = [r["score"] for r in records]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    kept = (await client.call("memory/recall", {"query": "x", "min_score": 0.95}))["records"]
    assert kept
    assert all(r["score"] >= 0.95 for r in kept)


async def test_empty_query_is_recency_not_search() -> None:
    client, conn = make(hits(3))
    for params in ({}, {"query": ""}, {"query": "   "}):
        out = await client.call("memory/recall", params)
        assert [r["id"] for r in out["records"]] == ["0", "1", "2"]
    assert conn.searches == []
    assert len(conn.ordered_reads) == 3
    assert all(r.newest_first for r in conn.ordered_reads)


async def test_timeline_reverses_newest_first_read() -> None:
    client, conn = make(hits(5))
    out = await client.call("memory/timeline", {"limit": 3})
    assert [r["id"] for r in out["records"]] == ["2", "1", "0"]
    assert conn.ordered_reads[-1].limit == 3
    assert conn.ordered_reads[-1].newest_first
    assert conn.searches == [], "timeline is never implemented through recall"
    assert all("score" not in r for r in out["records"])


async def test_vectors_and_capability_gates() -> None:
    client, conn = make(hits(2), vectors=VectorInfo(3, "cosine", ("cosine",)))
    assert await code_of(client, "memory/recall", {"embedding": [0.1, 0.2]}) == -32008
    await client.call("memory/recall", {"embedding": [0.1, 0.2, 0.3], "query": "x"})
    assert conn.searches[-1].dense == [0.1, 0.2, 0.3]
    assert conn.searches[-1].text == "x", "text and vector together are hybrid"
    no_vec, _ = make(hits(2))
    assert await code_of(no_vec, "memory/recall", {"embedding": [0.1]}) == -32003
    assert await code_of(no_vec, "memory/recall", {"tier": "episodic"}) == -32003
    assert await code_of(no_vec, "memory/timeline", {"tier": "episodic"}) == -32003


async def test_read_only_and_unknown_methods() -> None:
    client, _ = make()
    for method in ("memory/remember", "memory/forget"):
        for params in ({}, {"records": [{"content": "x"}]}, {"ids": ["1"]}):
            assert await code_of(client, method, params) == -32004
    for method in (
        "memory/summarize",  # docs/protocol.md: an undeclared capability, as the reference does
        "memory/promote",
        "memory/consolidate",
        "memory/reinforce",
        "memory/session/list",
        "memory/events",
    ):
        assert await code_of(client, method, {}) == -32003
    assert await code_of(client, "memory/bogus", {}) == -32601
    assert await code_of(client, "tools/list", {}) == -32601


async def test_fetch_key_required_and_miss_is_null() -> None:
    client, conn = make()
    assert await client.call("memory/fetch", {"key": "kb/x"}) == {"record": None}
    assert conn.fetches[-1].must == (Condition("k", ("kb/x",)),)
    assert await code_of(client, "memory/fetch", {}) == -32602
    assert await code_of(client, "memory/fetch", {"key": ""}) == -32602


async def test_prompt_does_not_change_records() -> None:
    client, _ = make(hits(5))
    plain = await client.call("memory/recall", {"query": "x"})
    for prompt in ({"style": "facts", "cite": True}, True, {"method": "none"}, {"budget": 20}):
        with_prompt = await client.call("memory/recall", {"query": "x", "prompt": prompt})
        assert with_prompt["records"] == plain["records"]
    # "- doc 0\n- doc 1" is 15 characters; a third entry would pass 20.
    assert with_prompt["prompt_ids"] == [r["id"] for r in plain["records"][:2]]
    assert with_prompt["prompt"] == "- doc 0\n- doc 1"
    none = await client.call("memory/recall", {"query": "x", "prompt": {"method": "none"}})
    assert set(none) == {"records"}
    for bad in ({"method": "model"}, {"style": "cited"}, {"style": "list"}, {"budget": -1}):
        assert await code_of(client, "memory/recall", {"prompt": bad}) == -32602
    d = await client.call("memory/describe", {})
    assert d["prompt"]["styles"] == ["auto", "facts", "transcript"]
    assert d["prompt"]["methods"] == ["template", "none"]


async def test_where_equality_is_checked_on_the_mapped_records() -> None:
    # An engine may approximate equality on analysed text (a phrase match); the store
    # keeps only records whose mapped value equals the asked one.
    docs = [
        Hit(id="1", source={"body": "x", "g": "team a", "lang": ["en", "fr"]}, score=0.9),
        Hit(id="2", source={"body": "x", "g": "team a admins", "lang": "en"}, score=0.8),
        Hit(id="3", source={"body": "x", "g": "team a", "lang": "de"}, score=0.7),
    ]
    client, _ = make(docs)
    out = await client.call("memory/recall", {"query": "x", "where": {"group": "team a"}})
    assert [r["id"] for r in out["records"]] == ["1", "3"]
    out = await client.call("memory/recall", {"query": "x", "where": {"lang": ["fr", "de"]}})
    assert [r["id"] for r in out["records"]] == ["1", "3"]
