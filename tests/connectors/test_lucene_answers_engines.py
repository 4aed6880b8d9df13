"""What real Elasticsearch 9 and OpenSearch 3 nodes return that a strict JSON reader refuses.

A document may hold a lone UTF-16 surrogate escape (``"\\ud800"``): valid JSON that the
engines store and return as they were given it. A recall hitting it, with the whole
document or its passages, and a fetch of it, answer with U+FFFD in its place.
"""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest

from connectors.factory import make_connector
from gateway.a2m.params import FetchParams, RecallParams
from gateway.config import validate_store
from gateway.store.connector_spec import connector_spec
from gateway.store.store import Store
from tests.conftest import lucene_node
from tests.support import lucene_loader
from tests.support.stores import started

pytestmark = pytest.mark.integration

INDEX = "a2m-test-lone-surrogates"
FILLER = "More words follow here, so the text runs on past the cap. " * 4
# The JSON text of each document's content, as a writer sent it (the escapes are JSON's).
SENT = {
    "lone": "Bone density \\ud800 falls in winter. " + FILLER + "A low one \\udfff here.",
    "pair": "Bone density \\ud83d\\ude00 rises in summer. " + FILLER,
}
READ = {
    "lone": "Bone density \ufffd falls in winter. " + FILLER + "A low one \ufffd here.",
    "pair": "Bone density \U0001f600 rises in summer. " + FILLER,
}


@pytest.fixture(scope="module", params=["elasticsearch9", "opensearch3"])
def node(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(backend, URL) of a node holding the two documents."""
    backend, url = lucene_node(request.param)
    client = lucene_loader.lucene_client(backend, url)
    try:
        properties = {"key": {"type": "keyword"}, "text": {"type": "text"}}
        lucene_loader.recreate_index(client, INDEX, {"mappings": {"properties": properties}})
    finally:
        client.close()
    for key, text in SENT.items():
        # Sent as JSON text: a client library would encode the surrogate its own way.
        body = ('{"key": "' + key + '", "text": "' + text + '"}').encode()
        request_ = urllib.request.Request(
            f"{url}/{INDEX}/_doc/{key}?refresh=true",
            data=body,
            method="PUT",
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request_, timeout=30) as answer:
            assert answer.status in (200, 201)
    return backend, url


def _store(node: tuple[str, str], search: dict[str, Any]) -> Store:
    backend, url = node
    config = validate_store(
        {
            "backend": backend,
            "index": INDEX,
            "connection": {"hosts": [url], "timeout_ms": 30_000},
            "mapping": {"content": "text", "key": "key"},
            "search": {"mode": "lexical", "text_fields": ["text"], **search},
        }
    )
    return Store("s", config, make_connector(connector_spec(config)))


def test_the_engine_returns_the_escape_as_it_was_given(node: tuple[str, str]) -> None:
    # Not vacuous: the answer holds the lone escape, which orjson refuses.
    _, url = node
    with urllib.request.urlopen(f"{url}/{INDEX}/_doc/lone", timeout=30) as answer:
        assert b"\\ud800" in answer.read()


async def test_a_recall_and_a_fetch_read_a_lone_surrogate_as_the_replacement(
    node: tuple[str, str],
) -> None:
    store = _store(node, {})
    async with started(store):
        records = (await store.recall(RecallParams(query="bone density", limit=5)))["records"]
        fetched = (await store.fetch(FetchParams(key="lone")))["record"]
    assert {r["key"]: r["content"] for r in records} == READ
    assert fetched["content"] == READ["lone"]


async def test_passages_of_a_document_with_a_lone_surrogate(node: tuple[str, str]) -> None:
    store = _store(node, {"passages": {"max_chars": 120, "count": 1}})
    async with started(store):
        records = (await store.recall(RecallParams(query="low one", limit=5)))["records"]
    lone = next(r for r in records if r["key"] == "lone")
    where = lone["metadata"]["passage"]
    start, end = where["offsets"][0]
    assert where["length"] == len(READ["lone"])
    assert lone["content"] == READ["lone"][start:end]
    assert "A low one \ufffd here." in lone["content"]
