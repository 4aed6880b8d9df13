"""memory/fetch (§4.9, keys), external records (§3.8), and embeddings params on a store that
does not declare the capability (§3.7; a store that does is in test_embeddings.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.conftest import NO_PARAMS, A2MClient, Corpus, assert_timestamps

pytestmark = pytest.mark.integration

INVALID_PARAMS = -32602
CAPABILITY_NOT_SUPPORTED = -32003


@pytest.fixture
def keys(describe: dict[str, Any], corpus: Corpus) -> list[str]:
    if "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    values: list[str] = corpus.values("key")
    assert values
    return values


def test_fetch_hit_returns_the_record_at_the_key(
    client: A2MClient, corpus: Corpus, keys: list[str]
) -> None:
    by_key = {r["key"]: r for r in corpus.with_field("key")}
    for key in keys[:: max(1, len(keys) // 5)][:5]:
        result = client.call("memory/fetch", {"key": key})
        assert set(result) >= {"record"}
        record = result["record"]
        assert record is not None, key
        assert record["key"] == key
        assert "score" not in record
        assert record == by_key[key], "fetch and timeline disagree about one record"
        assert_timestamps([record])


@pytest.mark.parametrize("key", ["no/such/key", "\u2603/x", "a" * 1000, "*", "no/such/"])
def test_fetch_miss_is_a_null_record(client: A2MClient, keys: list[str], key: str) -> None:
    if key in keys:
        pytest.skip("the key exists")
    assert client.call("memory/fetch", {"key": key}) == {"record": None}


def test_fetch_of_a_prefix_is_not_a_prefix_match(client: A2MClient, keys: list[str]) -> None:
    key = next((k for k in keys if "/" in k), None)
    if key is None:
        pytest.skip("no hierarchical key")
    prefix = key[: key.rindex("/") + 1]
    if prefix in keys:
        pytest.skip("the prefix is itself a key")
    assert client.call("memory/fetch", {"key": prefix}) == {"record": None}


@pytest.mark.parametrize("params", [NO_PARAMS, {}, {"key": ""}, {"owner": "x"}], ids=repr)
def test_fetch_missing_or_empty_key_is_invalid_params(
    client: A2MClient, keys: list[str], params: Any
) -> None:
    assert client.error_code("memory/fetch", params) == INVALID_PARAMS


def test_fetch_ignores_unknown_params(client: A2MClient, keys: list[str]) -> None:
    plain = client.call("memory/fetch", {"key": keys[0]})
    assert client.call("memory/fetch", {"key": keys[0], "revision": 3, "x": {}}) == plain


# -- external --------------------------------------------------------------------------------------


def test_uri_and_media_type_are_the_same_through_every_method(
    client: A2MClient, describe: dict[str, Any], corpus: Corpus
) -> None:
    if "external" not in describe["capabilities"]:
        pytest.skip("external not declared")
    sample = corpus.with_field("uri")[:5]
    assert sample
    for record in sample:
        [via_recall] = client.call("memory/recall", {"where": {"id": record["id"]}})["records"]
        for name in ("uri", "media_type"):
            assert via_recall.get(name) == record.get(name), name
        if "key" in record and "keys" in describe["capabilities"]:
            fetched = client.call("memory/fetch", {"key": record["key"]})["record"]
            for name in ("uri", "media_type"):
                assert fetched.get(name) == record.get(name), name
        hits = client.call("memory/recall", {"query": record.get("content", "")[:300], "limit": 50})
        hit = next((h for h in hits["records"] if h["id"] == record["id"]), None)
        assert hit is not None, "a record's own content did not recall it"
        assert hit.get("uri") == record["uri"]
        assert hit.get("media_type") == record.get("media_type")


# -- embeddings ------------------------------------------------------------------------------------


def test_embedding_param_without_embeddings_is_capability_not_supported(
    client: A2MClient, describe: dict[str, Any]
) -> None:
    if "embeddings" in describe["capabilities"]:
        pytest.skip("embeddings declared")
    for width in (3, 384):
        params = {"embedding": [0.1] * width}
        assert client.error_code("memory/recall", params) == CAPABILITY_NOT_SUPPORTED


def test_embeddings_true_without_embeddings_returns_no_vectors(
    client: A2MClient, describe: dict[str, Any]
) -> None:
    if "embeddings" in describe["capabilities"]:
        pytest.skip("embeddings declared")
    records = client.call("memory/recall", {"query": "gateway", "embeddings": True})["records"]
    assert records
    assert all("embedding" not in r for r in records)
