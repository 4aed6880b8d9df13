"""`verify`: a kNN + BM25 smoke test on each running node, a small collection on Qdrant."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from tests.engines.manager.commands import running
from tests.engines.manager.nodes import KEYCLOAK, NAMES, NODES, OPENSEARCH, QDRANT, EngineError, log
from tests.engines.manager.qdrant import qdrant_request
from tests.engines.manager.rest import http
from tests.engines.manager.state import load_state


def smoke_vectors(n: int, dims: int = 384) -> list[list[float]]:
    """Deterministic, clearly separated vectors: doc i points along axis i."""
    return [[1.0 if j == i else 0.01 for j in range(dims)] for i in range(n)]


def smoke_index(kind: str) -> dict[str, Any]:
    """The smoke index's settings and mappings: a cosine kNN field in the engine's own terms."""
    if kind == OPENSEARCH:
        vec_field: dict[str, Any] = {
            "type": "knn_vector",
            "dimension": 384,
            "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
        }
        settings: dict[str, Any] = {"index.knn": True, "number_of_replicas": 0}
    else:
        vec_field = {"type": "dense_vector", "dims": 384, "index": True, "similarity": "cosine"}
        settings = {"number_of_replicas": 0}
    return {
        "settings": settings,
        "mappings": {
            "properties": {
                "title": {"type": "text"},
                "body": {"type": "text"},
                "vec": vec_field,
            }
        },
    }


def smoke_knn(kind: str, query_vec: list[float]) -> dict[str, Any]:
    """A top-2 kNN search body: OpenSearch's `knn` query, Elasticsearch's top-level `knn`."""
    if kind == OPENSEARCH:
        return {"size": 2, "query": {"knn": {"vec": {"vector": query_vec, "k": 2}}}}
    return {
        "size": 2,
        "knn": {"field": "vec", "query_vector": query_vec, "k": 2, "num_candidates": 10},
    }


def verify_one(name: str, url: str) -> None:
    index = "a2m-engines-smoke"
    docs = ["the quick brown fox", "a lazy dog sleeps", "retrieval gateway for memory"]
    vectors = smoke_vectors(len(docs))
    kind = NODES[name].kind
    with contextlib.suppress(EngineError):
        http("DELETE", f"{url}/{index}")
    http("PUT", f"{url}/{index}", smoke_index(kind))
    try:
        lines = []
        for i, (text, vec) in enumerate(zip(docs, vectors, strict=True)):
            lines.append(json.dumps({"index": {"_index": index, "_id": str(i)}}))
            lines.append(json.dumps({"title": text.split()[-1], "body": text, "vec": vec}))
        bulk = http("POST", f"{url}/_bulk?refresh=true", ndjson="\n".join(lines) + "\n")
        if bulk.get("errors"):
            raise EngineError(f"{name}: bulk errors: {json.dumps(bulk)[:500]}")
        query_vec = [v + (0.2 if j == 0 else 0.0) for j, v in enumerate(vectors[2])]
        hits = http("POST", f"{url}/{index}/_search", smoke_knn(kind, query_vec))["hits"]["hits"]
        if [h["_id"] for h in hits] != ["2", "0"]:
            raise EngineError(f"{name}: unexpected kNN hits {hits}")
        bm25 = http(
            "POST",
            f"{url}/{index}/_search",
            {"query": {"multi_match": {"query": "lazy dog", "fields": ["title^2", "body"]}}},
        )["hits"]["hits"]
        if not bm25 or bm25[0]["_id"] != "1":
            raise EngineError(f"{name}: unexpected multi_match hits {bm25}")
    finally:
        http("DELETE", f"{url}/{index}")
    log(
        f"{name} OK at {url}: knn top {[h['_id'] for h in hits]}, multi_match top "
        f"{bm25[0]['_id']} (score {bm25[0]['_score']:.3f})"
    )


def verify_qdrant(entry: dict[str, Any]) -> None:
    """Create, fill, query and drop a small collection; the read-only key may read only."""
    name = "a2m-engines-smoke"
    with contextlib.suppress(EngineError):
        qdrant_request(entry, "DELETE", f"/collections/{name}")
    qdrant_request(
        entry, "PUT", f"/collections/{name}", {"vectors": {"size": 4, "distance": "Cosine"}}
    )
    try:
        points = [
            {"id": i, "vector": smoke_vectors(3, 4)[i], "payload": {"i": i}} for i in range(3)
        ]
        qdrant_request(entry, "PUT", f"/collections/{name}/points?wait=true", {"points": points})
        query = {"query": [0.01, 0.01, 1.2, 0.01], "limit": 2}
        found = qdrant_request(entry, "POST", f"/collections/{name}/points/query", query)
        ids = [p["id"] for p in found["result"]["points"]]
        if ids[:1] != [2]:
            raise EngineError(f"qdrant: unexpected query hits {ids}")
    finally:
        qdrant_request(entry, "DELETE", f"/collections/{name}")
    log(f"qdrant OK at {entry['url']}: query top {ids}")


def cmd_verify() -> int:
    state = load_state()
    names = [n for n in NAMES if running(state, n) and NODES[n].kind != KEYCLOAK]
    if not names:
        raise EngineError("no node is running: `start` first")
    for name in names:
        if NODES[name].kind == QDRANT:
            verify_qdrant(state[name])
        else:
            verify_one(name, state[name]["url"])
    return 0
