"""memory/timeline (§4.4): ascending created_at; with limit, the newest `limit`, still ascending."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.conftest import A2MClient, Corpus, assert_timestamps

pytestmark = pytest.mark.integration

INVALID_PARAMS = -32602


def timeline(client: A2MClient, **params: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = client.call("memory/timeline", params)["records"]
    return records


def test_timeline_is_ascending_by_created_at(corpus: Corpus) -> None:
    records = corpus.records
    assert records
    assert_timestamps(records)
    dated = [r["created_at"] for r in records if "created_at" in r]
    assert len(dated) == len(records), "timeline returned records without created_at"
    # Same format, same width: string order is time order.
    assert dated == sorted(dated), "timeline is not ascending by created_at"


def test_timeline_carries_no_scores(corpus: Corpus) -> None:
    assert all("score" not in r for r in corpus.records)


def test_timeline_without_limit(client: A2MClient, corpus: Corpus) -> None:
    records = timeline(client)
    assert records
    dated = [r["created_at"] for r in records]
    assert dated == sorted(dated)
    # The server's default window is still the newest records (§4.4 with limit).
    if len(records) < len(corpus.records):
        assert dated[0] >= corpus.records[-len(records)]["created_at"]


@pytest.mark.parametrize("limit", [1, 2, 5, 17])
def test_limit_takes_the_newest_still_ascending(
    client: A2MClient, corpus: Corpus, limit: int
) -> None:
    full = corpus.records
    if len(full) <= limit:
        pytest.skip("corpus smaller than the limit")
    got = timeline(client, limit=limit)
    assert len(got) == limit
    dates = [r["created_at"] for r in got]
    assert dates == sorted(dates), "limited timeline is not ascending"
    newest = full[-limit:]
    assert dates == [r["created_at"] for r in newest], "limit did not take the newest records"
    # Ids must match except among records tied on the boundary timestamp.
    boundary = newest[0]["created_at"]
    strict = {r["id"] for r in newest if r["created_at"] > boundary}
    assert strict <= {r["id"] for r in got}
    tied = {r["id"] for r in full if r["created_at"] == boundary}
    assert {r["id"] for r in got if r["created_at"] == boundary} <= tied


def test_timeline_is_not_relevance_order(client: A2MClient) -> None:
    # A query param is not a timeline param: it is ignored, never turned into a ranking.
    plain = timeline(client, limit=10)
    assert timeline(client, limit=10, query="origin header") == plain


def test_limit_beyond_max_recall_limit_is_invalid_params(client: A2MClient, corpus: Corpus) -> None:
    assert client.error_code("memory/timeline", {"limit": corpus.max_recall_limit + 1}) == (
        INVALID_PARAMS
    )
    assert client.error_code("memory/timeline", {"limit": -1}) == INVALID_PARAMS


def test_timeline_where_keeps_ascending_order(client: A2MClient, corpus: Corpus) -> None:
    groups = corpus.values("group")
    if not groups:
        pytest.skip("no groups in the demo corpus")
    got = timeline(client, where={"group": groups[0]})
    assert got
    dates = [r["created_at"] for r in got]
    assert dates == sorted(dates)
    assert all(r["group"] == groups[0] for r in got)
