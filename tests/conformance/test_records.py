"""Records as the demo's source documents hold them (§3.1, §3.8: returned unchanged).

The demo's "ingestion pipeline" is the packaged corpus: every section of
``gateway/demo/corpus/*.md`` is one record. What the gateway returns must be
exactly what was indexed, field by field.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.demo import chunks
from tests.conformance.conftest import A2MClient, Corpus, as_fetched

pytestmark = pytest.mark.integration


def test_every_chunk_is_a_record_and_nothing_else(corpus: Corpus) -> None:
    source = chunks()
    assert len(corpus.records) == len(source)
    assert {r["key"] for r in corpus.records} == {c.key for c in source}


def test_fields_come_back_unchanged(corpus: Corpus) -> None:
    by_key = {c.key: c for c in chunks()}
    for record in corpus.records:
        chunk = by_key[record["key"]]
        assert record["content"] == chunk.content
        assert record["uri"] == chunk.uri, "§3.8: uri MUST be returned unchanged"
        assert record["media_type"] == "text/markdown"
        assert record["group"] == chunk.group
        assert record["created_at"] == chunk.created_at
        assert record["metadata"] == {"title": chunk.title}, "metadata must round-trip"


def test_recall_and_fetch_return_the_same_record(client: A2MClient, corpus: Corpus) -> None:
    for record in corpus.records[::11]:
        fetched = client.call("memory/fetch", {"key": record["key"]})["record"]
        assert fetched == record
        hits = client.call("memory/recall", {"query": record["content"][:400], "limit": 20})
        same = [h for h in hits["records"] if h["id"] == record["id"]]
        assert same, f"{record['key']} not recalled by its own text"
        assert as_fetched(same[0], fetched) == record


@pytest.mark.parametrize("owner", ["someone-else", "", "admin"])
def test_client_supplied_owner_never_scopes_without_the_scopes_capability(
    client: A2MClient, describe: dict[str, Any], owner: str
) -> None:
    # §6: owner is not a security boundary; a server without scopes ignores it (§2) rather
    # than letting a client select what it sees by asserting one.
    if "scopes" in describe["capabilities"]:
        pytest.skip("scopes declared")
    plain = client.call("memory/recall", {"query": "origin", "limit": 5})
    assert client.call("memory/recall", {"query": "origin", "limit": 5, "owner": owner}) == plain
    tl = client.call("memory/timeline", {"limit": 5})
    assert client.call("memory/timeline", {"limit": 5, "owner": owner}) == tl
    key = tl["records"][0]["key"]
    assert client.call("memory/fetch", {"key": key, "owner": owner}) == client.call(
        "memory/fetch", {"key": key}
    )
