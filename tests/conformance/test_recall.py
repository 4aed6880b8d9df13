"""memory/recall (§4.3), where (§5.2), score (§5.3), keys' key_prefix (§3.6), timestamps (§3.3)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.conformance.conftest import (
    BACKENDS,
    A2MClient,
    Corpus,
    Servers,
    assert_scores,
    assert_timestamps,
)

pytestmark = pytest.mark.integration

INVALID_PARAMS = -32602

QUERIES = [
    "qdrant collection",
    "how do I configure a store",
    "timeline order created_at",
    "read-only gateway",
    "capability not supported error",
    "origin header",
    "embedding dimensions metric",
]


def recall(client: A2MClient, **params: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = client.call("memory/recall", params)["records"]
    return records


@pytest.mark.parametrize("query", QUERIES)
def test_scores_in_unit_range_and_descending(client: A2MClient, query: str) -> None:
    records = recall(client, query=query, limit=20)
    assert records, f"nothing recalled for {query!r} from the demo corpus"
    assert_scores(records)
    assert_timestamps(records)
    for r in records:
        assert isinstance(r["id"], str)
        assert r["id"]
        assert "embedding" not in r, "vectors are not returned by default (§3.7)"


LUCENE_BACKENDS = [p for p in BACKENDS if p.values[0] in ("elasticsearch", "opensearch")]


def _tie_groups(ranked: list[tuple[str, float]]) -> list[set[str]]:
    """Ids grouped by equal score, in rank order: an engine may order ties either way."""
    groups: list[tuple[float, set[str]]] = []
    for doc_id, score in ranked:
        if groups and groups[-1][0] == pytest.approx(score, rel=1e-9):
            groups[-1][1].add(doc_id)
        else:
            groups.append((score, {doc_id}))
    return [ids for _, ids in groups]


@pytest.mark.parametrize("engine", LUCENE_BACKENDS)
def test_recall_ranks_as_the_engine_does(
    servers: Servers, request: pytest.FixtureRequest, engine: str
) -> None:
    """The gateway's order is the engine's BM25 order, and its score the engine's over the best.

    The engine is asked directly with the query the store is configured for (a best_fields
    multi_match over title^2 and content, tests/support/demo_loader.py).
    """
    backend = servers.backend(engine, request)
    client = servers.http_client(backend)
    assert backend.store is not None
    url, index = backend.store["connection"]["hosts"][0], backend.store["index"]
    compared = 0
    for query in QUERIES:
        body = {
            "size": 30,
            "query": {
                "multi_match": {
                    "query": query,
                    "fields": ["title^2", "content"],
                    "type": "best_fields",
                }
            },
        }
        hits = httpx.post(f"{url}/{index}/_search", json=body, timeout=30).json()["hits"]["hits"]
        assert len(hits) >= 2, f"{engine}: {query!r} matches too little to compare rankings"
        best = hits[0]["_score"]
        groups = _tie_groups([(h["_id"], h["_score"]) for h in hits])
        # Compare whole tie groups only: the one cut by the limit may be served in any order.
        limit = 10
        while sum(map(len, groups)) > limit:
            groups.pop()
        assert groups, f"{engine}: more than {limit} of {query!r}'s best hits tie"
        want = sum(map(len, groups))
        got = recall(client, query=query, limit=want)
        assert len(got) == want, query
        at = 0
        for ids in groups:
            served = got[at : at + len(ids)]
            assert {r["id"] for r in served} == ids, f"{engine}: {query!r} ranked unlike the engine"
            at += len(ids)
        scores = {h["_id"]: h["_score"] / best for h in hits}
        for r in got:
            assert r["score"] == pytest.approx(scores[r["id"]], abs=1e-6), (query, r["id"])
        compared += want
    assert compared >= 4 * len(QUERIES)


def test_a_records_own_words_recall_it(client: A2MClient, corpus: Corpus) -> None:
    # Ranking is the server's business (§5.1), but a query made of one chunk's distinctive
    # words must find that chunk among the first few: otherwise recall is not searching.
    candidates = [
        r for r in corpus.records if len(re.findall(r"[A-Za-z]{5,}", r.get("content") or "")) >= 12
    ]
    assert candidates
    missed = []
    for record in candidates[:: max(1, len(candidates) // 5)][:5]:
        words = list(dict.fromkeys(re.findall(r"[A-Za-z]{5,}", record["content"])))[:12]
        ids = [r["id"] for r in recall(client, query=" ".join(words), limit=10)]
        if record["id"] not in ids:
            missed.append(record["id"])
    assert len(missed) <= 1, f"records not found by their own words: {missed}"


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_limit_is_honoured(client: A2MClient, limit: int) -> None:
    records = recall(client, query="gateway", limit=limit)
    assert 0 < len(records) <= limit


def test_limit_up_to_max_recall_limit(client: A2MClient, corpus: Corpus) -> None:
    records = recall(client, query="the", limit=corpus.max_recall_limit)
    assert len(records) <= corpus.max_recall_limit
    empty_query = recall(client, limit=corpus.max_recall_limit)
    assert len(empty_query) <= corpus.max_recall_limit


def test_limit_beyond_max_recall_limit_is_invalid_params(client: A2MClient, corpus: Corpus) -> None:
    # §4.1: a server MUST enforce its limits regardless of the client.
    for params in (
        {"query": "gateway", "limit": corpus.max_recall_limit + 1},
        {"limit": corpus.max_recall_limit + 1},
        {"query": "gateway", "limit": 10**9},
    ):
        assert client.error_code("memory/recall", params) == INVALID_PARAMS


@pytest.mark.parametrize("limit", [0, -1, -100])
def test_limit_zero_or_negative_is_never_unbounded(
    client: A2MClient, corpus: Corpus, limit: int
) -> None:
    # §4.3: limit 0 means "no limit" only when no max_recall_limit is declared.
    response = client.request("memory/recall", {"query": "gateway", "limit": limit})
    if "error" in response:
        assert response["error"]["code"] == INVALID_PARAMS
    else:
        assert limit == 0
        assert len(response["result"]["records"]) <= corpus.max_recall_limit


def test_min_score_filters(client: A2MClient) -> None:
    full = recall(client, query="store configuration mapping", limit=20)
    assert len(full) >= 3
    threshold = full[len(full) // 2]["score"]
    kept = recall(client, query="store configuration mapping", limit=20, min_score=threshold)
    assert kept, "min_score equal to a returned score dropped that record"
    assert all(r["score"] >= threshold for r in kept)
    assert [r["id"] for r in kept] == [r["id"] for r in full if r["score"] >= threshold]
    assert recall(client, query="store configuration mapping", min_score=1.01) == []
    assert recall(client, query="store configuration mapping", limit=20, min_score=0) == full


@pytest.mark.parametrize("params", [{}, {"query": ""}, {"query": "   "}, {"query": None}], ids=repr)
def test_absent_or_empty_query_returns_records_by_recency(
    client: A2MClient, params: dict[str, Any]
) -> None:
    # §4.3: records ranked by the server's no-query order (recency RECOMMENDED), not an error.
    response = client.request("memory/recall", {**params, "limit": 10})
    assert "result" in response, response.get("error")
    records = response["result"]["records"]
    assert records
    assert_scores(records)
    assert_timestamps(records)
    dates = [r["created_at"] for r in records if "created_at" in r]
    if len(dates) == len(records):
        assert dates == sorted(dates, reverse=True), "no-query recall is not most recent first"


def test_unknown_params_do_not_change_recall(client: A2MClient) -> None:
    plain = recall(client, query="origin header", limit=5)
    assert recall(client, query="origin header", limit=5, hybrid={"alpha": 0.5}, x=1) == plain


# -- where -----------------------------------------------------------------------------------------

FILTER_FIELDS = ("group", "key", "media_type", "uri", "role")


def _filterable(corpus: Corpus) -> list[tuple[str, list[Any]]]:
    out = []
    for name in FILTER_FIELDS:
        values = corpus.values(name)
        if values:
            out.append((name, values))
    return out


def _words_of(record: dict[str, Any]) -> str:
    """A query the record itself answers: its first distinctive words."""
    words = list(dict.fromkeys(re.findall(r"[A-Za-z]{5,}", record.get("content") or "")))
    assert words, record["id"]
    return " ".join(words[:12])


def test_where_equality_on_record_fields(client: A2MClient, corpus: Corpus) -> None:
    fields = _filterable(corpus)
    assert fields, "no record field to filter on in the demo corpus"
    for name, values in fields:
        value = values[0]
        expected = {r["id"] for r in corpus.records if r.get(name) == value}
        got = recall(client, where={name: value}, limit=corpus.max_recall_limit)
        assert got, f"where {name}={value!r} found nothing"
        assert all(r.get(name) == value for r in got), name
        if len(corpus.records) < corpus.max_recall_limit:
            assert {r["id"] for r in got} == expected, name
        holder = next(r for r in corpus.records if r.get(name) == value)
        ranked = recall(client, query=_words_of(holder), where={name: value}, limit=20)
        assert holder["id"] in {r["id"] for r in ranked}, name
        assert all(r.get(name) == value for r in ranked), name
        tl = client.call("memory/timeline", {"where": {name: value}})["records"]
        assert tl, name
        assert all(r.get(name) == value for r in tl), name


@pytest.mark.parametrize("name", ["content", "created_at"])
def test_where_equality_on_every_record_field(client: A2MClient, corpus: Corpus, name: str) -> None:
    # §5.2: "a conjunction of equality tests against record fields ... MUST support at least
    # this". content and created_at are record fields the demo's records carry.
    target = corpus.with_field(name)[0]
    response = client.request("memory/recall", {"where": {name: target[name]}})
    assert "result" in response, f"where on the record field {name!r} refused: {response}"
    got = response["result"]["records"]
    assert target["id"] in {r["id"] for r in got}
    assert all(r.get(name) == target[name] for r in got)


def test_where_on_id(client: A2MClient, corpus: Corpus) -> None:
    target = corpus.records[0]
    got = recall(client, where={"id": target["id"]})
    assert [r["id"] for r in got] == [target["id"]]


def test_where_array_is_any_of(client: A2MClient, corpus: Corpus) -> None:
    for name, values in _filterable(corpus):
        if len(values) < 2:
            continue
        chosen = values[:2]
        got = recall(client, where={name: chosen}, limit=corpus.max_recall_limit)
        assert {r.get(name) for r in got} == set(chosen), name
        return
    pytest.fail("no field with two values to choose from: nothing was checked")
    pytest.skip("no field with two distinct values")


def test_where_empty_any_of_matches_nothing_or_is_refused(client: A2MClient) -> None:
    # "any of" nothing is false for every record; refusing it as INVALID_PARAMS is the
    # gateway's documented choice, and either answer is clean.
    response = client.request("memory/recall", {"where": {"group": []}})
    if "error" in response:
        assert response["error"]["code"] == INVALID_PARAMS
    else:
        assert response["result"]["records"] == []


def test_where_is_a_conjunction(client: A2MClient, corpus: Corpus) -> None:
    fields = _filterable(corpus)
    if len(fields) < 2:
        pytest.skip("fewer than two filterable fields")
    (a, _), (b, _) = fields[0], fields[1]
    sample = next(r for r in corpus.records if r.get(a) is not None and r.get(b) is not None)
    got = recall(client, where={a: sample[a], b: sample[b]}, limit=corpus.max_recall_limit)
    assert sample["id"] in {r["id"] for r in got}
    assert all(r.get(a) == sample[a] and r.get(b) == sample[b] for r in got)
    other = next((v for v in corpus.values(b) if v != sample[b]), None)
    if other is not None:
        mixed = recall(client, where={a: sample[a], b: other}, limit=corpus.max_recall_limit)
        both = {r["id"] for r in corpus.records if r.get(a) == sample[a] and r.get(b) == other}
        assert len(corpus.records) < corpus.max_recall_limit, "the corpus is not all there"
        assert {r["id"] for r in mixed} == both


def test_where_on_metadata_keys(client: A2MClient, corpus: Corpus) -> None:
    for record in corpus.with_field("metadata"):
        for key, value in record["metadata"].items():
            if key in FILTER_FIELDS or not isinstance(value, str | int | bool):
                continue
            got = recall(client, where={key: value}, limit=corpus.max_recall_limit)
            assert record["id"] in {r["id"] for r in got}
            assert all(r.get("metadata", {}).get(key) == value for r in got)
            return
    pytest.skip("no scalar metadata in the demo corpus")


@pytest.mark.parametrize(
    "where",
    [
        {"no_such_field": "x"},
        {"no_such_field": ["x", "y"]},
        {"tier": "semantic"},
        {"session": "s1"},
        {"owner": "me"},
        {"salience": 1},
    ],
    ids=repr,
)
def test_where_on_an_unexposed_key_matches_nothing(
    client: A2MClient, corpus: Corpus, where: dict[str, Any]
) -> None:
    name = next(iter(where))
    if any(name in r or name in r.get("metadata", {}) for r in corpus.records):
        pytest.skip(f"{name} is exposed by this store")
    assert recall(client, where=where) == []
    assert recall(client, query="gateway", where=where) == []
    assert client.call("memory/timeline", {"where": where})["records"] == []


def test_where_with_a_value_nobody_has_matches_nothing(client: A2MClient, corpus: Corpus) -> None:
    fields = _filterable(corpus)
    assert fields, "no record field to filter on in the corpus"
    for name, _ in fields:
        assert recall(client, where={name: "no such value \u2603"}) == []


# -- key_prefix ------------------------------------------------------------------------------------


def _prefixes(corpus: Corpus) -> list[str]:
    out: list[str] = []
    for key in corpus.values("key"):
        if "/" in key:
            out.append(key[: key.rindex("/") + 1])
        out.append(key)
    return list(dict.fromkeys(out))


def test_key_prefix_selects_keys_at_or_beneath(
    client: A2MClient, describe: dict[str, Any], corpus: Corpus
) -> None:
    if "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    prefixes = _prefixes(corpus)
    assert prefixes
    for prefix in prefixes[:6]:
        expected = {r["id"] for r in corpus.records if r.get("key", "").startswith(prefix)}
        got = recall(client, key_prefix=prefix, limit=corpus.max_recall_limit)
        assert got, prefix
        assert all(r["key"].startswith(prefix) for r in got), prefix
        if len(corpus.records) < corpus.max_recall_limit:
            assert {r["id"] for r in got} == expected, prefix
        holder = next(r for r in corpus.records if r.get("key", "").startswith(prefix))
        ranked = recall(client, query=_words_of(holder), key_prefix=prefix, limit=20)
        assert holder["id"] in {r["id"] for r in ranked}, prefix
        assert all(r["key"].startswith(prefix) for r in ranked), prefix
        tl = client.call("memory/timeline", {"key_prefix": prefix})["records"]
        assert tl, prefix
        assert all(r["key"].startswith(prefix) for r in tl), prefix


@pytest.mark.parametrize("prefix", ["no/such/prefix/", "\u2603", "*", ".*", "%"])
def test_key_prefix_nobody_has_matches_nothing(
    client: A2MClient, describe: dict[str, Any], prefix: str
) -> None:
    if "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    assert recall(client, key_prefix=prefix) == []
    assert recall(client, query="gateway", key_prefix=prefix) == []
    assert client.call("memory/timeline", {"key_prefix": prefix})["records"] == []


def test_key_prefix_is_a_prefix_not_a_substring(
    client: A2MClient, describe: dict[str, Any], corpus: Corpus
) -> None:
    if "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    key = corpus.values("key")[0]
    tail = key[1:]
    if any(k.startswith(tail) for k in corpus.values("key")):
        pytest.skip("the key's tail is itself a prefix of some key")
    assert recall(client, key_prefix=tail) == []
