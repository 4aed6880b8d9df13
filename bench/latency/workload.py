"""The latency benchmark's query mix and how each way spells one item on the wire.

One seeded draw of SciFact queries (BM25 text or a kNN vector) and, per item, the A2M
recall, the MCP ``tools/call search`` and the engine ``_search`` bodies the gateway's
connectors send, so every way asks the engine for the same work.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import orjson

from bench.quality.collection import Split

LIMIT = 10
KNN_DEPTH = 100
"""The gateway's default ``search.candidates``: its kNN depth (OS ``k``, ES num_candidates)."""
SOURCE = ["text", "key", "title"]
"""``mapping.source_fields()`` of the store below: the only fields either side fetches."""
TEXT_FIELDS = ["title", "text"]
JSON_HEADERS = {"content-type": "application/json"}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MCP_VERSION = "2026-07-28"
MODERN_HEADERS = {
    "mcp-protocol-version": MCP_VERSION,
    "mcp-method": "tools/call",
    "mcp-name": "search",
}


@dataclass(frozen=True)
class Item:
    text: str | None
    vector: list[float] | None
    query: str = ""
    """The query's text, also for a kNN item (what an MCP `search` sends)."""


def workload(split: Split, n: int, dense_share: float, seed: int) -> list[Item]:
    rng = random.Random(seed)
    qids = list(split.query_ids)
    items = []
    for _ in range(n):
        qid = rng.choice(qids)
        if rng.random() < dense_share:
            items.append(Item(None, split.sf.query_vector(qid), split.sf.queries[qid]))
        else:
            items.append(Item(split.sf.queries[qid], None, split.sf.queries[qid]))
    return items


def recall_params(item: Item) -> dict[str, Any]:
    if item.text is not None:
        return {"query": item.text, "limit": LIMIT}
    return {"embedding": item.vector, "limit": LIMIT}


def recall_call(item: Item, request_id: int) -> bytes:
    """One A2M ``memory/recall`` request."""
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "memory/recall",
            "params": recall_params(item),
        }
    )


def recall_ok(raw: bytes) -> bool:
    """Whether an A2M answer carries a result (not an error)."""
    answer = orjson.loads(raw)
    return isinstance(answer, dict) and "result" in answer


def mcp_search(item: Item, request_id: int) -> bytes:
    """One stateless 2026-07-28 ``tools/call search`` (the envelope the SDK's client sends)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {
                "name": "search",
                "arguments": {"query": item.query, "limit": LIMIT},
                "_meta": meta,
            },
        }
    )


def opensearch_body(item: Item) -> dict[str, Any]:
    """The body the gateway's OpenSearch connector sends for the same recall."""
    body: dict[str, Any] = {
        "size": LIMIT,
        "_source": {"includes": SOURCE},
        "track_total_hits": False,
    }
    if item.text is not None:
        body["query"] = {
            "multi_match": {"query": item.text, "fields": TEXT_FIELDS, "type": "best_fields"}
        }
    else:
        body["query"] = {"knn": {"embedding": {"vector": item.vector, "k": KNN_DEPTH}}}
    return body


def elasticsearch_body(item: Item) -> dict[str, Any]:
    """The body the gateway's Elasticsearch connector sends for the same recall."""
    if item.text is not None:
        return opensearch_body(item)
    return {
        "size": LIMIT,
        "_source": {"includes": SOURCE},
        "track_total_hits": False,
        "knn": {
            "field": "embedding",
            "query_vector": item.vector,
            "k": LIMIT,
            "num_candidates": KNN_DEPTH,
        },
    }


def store_config(engine: str, url: str, index: str) -> dict[str, Any]:
    return {
        "backend": engine,
        "index": index,
        "connection": {"hosts": [url], "pool_maxsize": 64},
        "mapping": {"content": "text", "key": "key", "metadata": ["title"]},
        "search": {"mode": "lexical", "text_fields": TEXT_FIELDS, "vector_field": "embedding"},
    }
