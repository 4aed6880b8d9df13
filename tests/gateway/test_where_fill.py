"""`where` fills `limit` on real engines.

`content` is analysed text with no keyword sub-field, so the engine can only
match `where.content` as a phrase and the store checks equality afterwards.
Among 40 documents, 20 equal the phrase and 20 merely contain it, interleaved
in time: a single engine read of `limit` would keep only half of them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.config import parse_config
from gateway.runtime import Gateway
from tests.support.lucene_loader import lucene_client

pytestmark = pytest.mark.integration

INDEX = "r2-where-fill"
EXACT = "alpha beta"
DOCS = [
    {
        "doc_id": f"d{i:02d}",
        "text": EXACT if i % 2 == 0 else f"{EXACT} gamma",
        "created_at": f"2026-01-01T00:{i:02d}:00Z",
    }
    for i in range(40)
]
EXACT_IDS = [d["doc_id"] for d in DOCS if d["text"] == EXACT]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
        pytest.param("opensearch", marks=pytest.mark.opensearch),
    ],
)
def engine(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    name: str = request.param
    url: str = request.getfixturevalue(f"{name}_url")
    client = lucene_client(name, url)
    try:
        if client.indices.exists(index=INDEX):
            client.indices.delete(index=INDEX)
        mappings = {
            "properties": {
                "doc_id": {"type": "keyword"},
                "text": {"type": "text"},
                "created_at": {"type": "date"},
            }
        }
        client.indices.create(
            index=INDEX, body={"settings": {"number_of_replicas": 0}, "mappings": mappings}
        )
        for doc in DOCS:
            client.index(index=INDEX, id=doc["doc_id"], body=doc)
        client.indices.refresh(index=INDEX)
        yield name, url
    finally:
        client.close()


def _gateway(engine: str, url: str, **limits: int) -> Gateway:
    store: dict[str, object] = {
        "backend": engine,
        "index": INDEX,
        "connection": {"hosts": [url]},
        "mapping": {"id": "doc_id", "content": "text", "created_at": "created_at"},
        "search": {"mode": "lexical", "text_fields": ["text"]},
    }
    if limits:
        store["limits"] = limits
    return Gateway(parse_config({"stores": {"s": store}}))


@pytest.mark.parametrize("method", ["memory/recall", "memory/timeline"])
async def test_where_fills_the_limit(engine: tuple[str, str], method: str) -> None:
    gateway = _gateway(*engine)
    try:
        d = gateway.dispatcher("s")
        result = await d.dispatch(method, {"where": {"content": EXACT}, "limit": 10})
        ids = [r["id"] for r in result["records"]]
        # The newest ten exact matches, whichever order the method gives them in.
        assert sorted(ids) == sorted(EXACT_IDS[-10:])
        assert all(r["content"] == EXACT for r in result["records"])
    finally:
        await gateway.close()


async def test_recall_by_query_with_where_fills_the_limit(engine: tuple[str, str]) -> None:
    # "gamma" ranks every near-miss above every exact match: one read of 15 keeps none.
    gateway = _gateway(*engine)
    try:
        result = await gateway.dispatcher("s").dispatch(
            "memory/recall", {"query": "beta gamma", "where": {"content": EXACT}, "limit": 15}
        )
        ids = {r["id"] for r in result["records"]}
        assert len(ids) == 15
        assert ids <= set(EXACT_IDS)
    finally:
        await gateway.close()


@pytest.mark.parametrize(("bound", "kept"), [(20, 0), (30, 10)])
async def test_the_refill_checks_at_most_the_bound_on_candidates(
    engine: tuple[str, str], bound: int, kept: int
) -> None:
    # The 20 near-misses rank first: a bound of 20 candidates reads only them (pages of
    # 15 and 20), one of 30 also the first 10 exact matches; neither reads the 60 that
    # would fill the limit.
    gateway = _gateway(*engine, max_where_candidates=bound)
    try:
        result = await gateway.dispatcher("s").dispatch(
            "memory/recall", {"query": "beta gamma", "where": {"content": EXACT}, "limit": 15}
        )
        ids = {r["id"] for r in result["records"]}
        assert len(ids) == kept
        assert ids <= set(EXACT_IDS)
    finally:
        await gateway.close()
