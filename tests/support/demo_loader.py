"""The packaged demo corpus in an Elasticsearch or OpenSearch index, and the store serving it.

The conformance suite (``tests/conformance``) runs against the embedded demo
store (Qdrant in process, qdrant-edge) and against the same corpus in a real Elasticsearch
and OpenSearch index. The chunks are :func:`gateway.demo.chunks`, exactly as the
demo indexes them; each becomes one document whose ``_id`` is its 1-based
position (the demo's Qdrant point id) and whose fields are the demo's payload:

- ``content``: ``text`` (``standard`` analyzer) with a ``keyword`` sub-field, so
  ``where: {content: ...}`` is an exact term on the sub-field.
- ``title``: ``text`` with a ``keyword`` sub-field (exact ``where`` on the
  ``title`` metadata key), searched with ``content`` by ``multi_match``.
- ``uri``, ``media_type``, ``key``, ``group``: ``keyword``.
- ``created_at``: ``date``.

``standard`` is in both engines' core: the Elasticsearch integ-test
distribution has no ``english`` analyzer (docs/engines.md).

The index name carries a hash of the index body and the documents, so an index
of that name holds exactly this corpus under exactly this mapping; it is marked
complete (``_meta.complete``) only once loaded and refreshed. Loading is
idempotent and safe against another test session loading it at the same time: a
complete index is used as it is, never deleted. :func:`load_index` does the same
for any small index (``tests/conformance/test_embeddings.py`` loads its vector
stores with it).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from gateway.demo import DEMO_STORE, MEDIA_TYPE, Chunk, chunks, default_demo_config
from tests.support.lucene_loader import Engine, LoadResult, lucene_client

INDEX_PREFIX = "a2m-conformance-demo"
ANALYZER = "standard"
WAIT_FOR_OTHER_LOADER_S = 60.0
"""How long an incomplete index is given to be finished by whoever is loading it."""


def _text_with_keyword() -> dict[str, Any]:
    # No ignore_above: every value (all well under Lucene's 32 KiB term limit) gets its term.
    return {"type": "text", "analyzer": ANALYZER, "fields": {"keyword": {"type": "keyword"}}}


def index_body() -> dict[str, Any]:
    """Settings and mappings of the demo index (the same on both engines)."""
    return {
        "settings": {
            # One shard: BM25 statistics are the whole corpus's, so scores are stable.
            "index": {"number_of_shards": 1, "number_of_replicas": 0}
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "content": _text_with_keyword(),
                "title": _text_with_keyword(),
                "uri": {"type": "keyword"},
                "media_type": {"type": "keyword"},
                "key": {"type": "keyword"},
                "group": {"type": "keyword"},
                "created_at": {"type": "date"},
            },
        },
    }


def index_name(prefix: str, body: dict[str, Any], docs: list[tuple[str, dict[str, Any]]]) -> str:
    """``prefix`` and a hash of the index body and documents: the name fixes the content."""
    digest = hashlib.sha256(json.dumps([body, docs], sort_keys=True).encode())
    return f"{prefix}-{digest.hexdigest()[:12]}"


def documents(items: list[Chunk]) -> list[tuple[str, dict[str, Any]]]:
    """(``_id``, ``_source``) of every chunk: the demo's Qdrant point id and payload."""
    return [
        (
            str(position),
            {
                "content": c.content,
                "title": c.title,
                "uri": c.uri,
                "media_type": MEDIA_TYPE,
                "key": c.key,
                "group": c.group,
                "created_at": c.created_at,
            },
        )
        for position, c in enumerate(items, start=1)
    ]


def _complete(client: Any, index: str, expected: int) -> bool:
    mapping = client.indices.get_mapping(index=index)
    meta = next(iter(dict(mapping).values()))["mappings"].get("_meta") or {}
    return bool(meta.get("complete")) and int(client.count(index=index)["count"]) == expected


def _already_exists(exc: Exception) -> bool:
    return "resource_already_exists_exception" in str(exc)


def _wait_for_other_loader(client: Any, index: str, expected: int) -> bool:
    """True once someone else's load of ``index`` completes; False if it never does."""
    deadline = time.monotonic() + WAIT_FOR_OTHER_LOADER_S
    while time.monotonic() < deadline:
        if not client.indices.exists(index=index):
            return False
        if _complete(client, index, expected):
            return True
        time.sleep(0.5)
    return False


def load_demo_index(engine: Engine, url: str) -> LoadResult:
    """The packaged demo corpus in an index of ``engine`` at ``url`` (see :func:`load_index`).

    Raises:
        RuntimeError: the bulk load reported errors or the count is wrong.
    """
    docs = documents(chunks())
    return load_index(engine, url, index_name(INDEX_PREFIX, index_body(), docs), index_body(), docs)


def load_index(
    engine: Engine,
    url: str,
    index: str,
    body: dict[str, Any],
    docs: list[tuple[str, dict[str, Any]]],
) -> LoadResult:
    """Create ``index`` with ``body`` and bulk-load ``docs`` (``_id``, ``_source``) into it,
    unless it is already complete.

    ``index`` should name its content (:func:`index_name`): a complete index is
    used as it is. One left incomplete is waited for (another session may be
    loading it), then rebuilt.

    Raises:
        RuntimeError: the bulk load reported errors or the count is wrong.
    """
    started = time.monotonic()
    client = lucene_client(engine, url)
    try:
        for _ in range(2):
            if client.indices.exists(index=index):
                if _complete(client, index, len(docs)) or _wait_for_other_loader(
                    client, index, len(docs)
                ):
                    return LoadResult(index, len(docs), False, time.monotonic() - started)
                # Left half-written by a load that died: rebuild it.
                client.indices.delete(index=index, ignore_unavailable=True)
            try:
                client.indices.create(index=index, body=body)
            except Exception as exc:
                if _already_exists(exc):
                    continue  # another session is loading it: wait for that load
                raise
            break
        else:
            raise RuntimeError(f"{index}: could not create it or wait for its load")
        _bulk(engine, client, index, docs)
        client.indices.refresh(index=index)
        count = int(client.count(index=index)["count"])
        if count != len(docs):
            raise RuntimeError(f"{index} holds {count} documents, expected {len(docs)}")
        client.indices.put_mapping(index=index, body={"_meta": {"complete": True}})
        return LoadResult(index, count, True, time.monotonic() - started)
    finally:
        client.close()


def _bulk(engine: Engine, client: Any, index: str, docs: list[tuple[str, dict[str, Any]]]) -> None:
    actions = [
        {"_op_type": "index", "_index": index, "_id": doc_id, "_source": source}
        for doc_id, source in docs
    ]
    if engine == "elasticsearch":
        from elasticsearch.helpers import bulk
    else:
        from opensearchpy.helpers import bulk
    _, failed = bulk(client, actions, raise_on_error=False, stats_only=False)
    assert isinstance(failed, list)  # stats_only=False: the failed items, not their count
    if failed:
        raise RuntimeError(f"bulk load of {index}: {len(failed)} failed, first {failed[0]!r:.500}")


def demo_store(engine: Engine, url: str, index: str) -> dict[str, Any]:
    """The demo store on ``engine``, as a config file's ``stores.demo`` section.

    The mapping is the embedded demo's (``config/demo.yaml``); search is BM25
    over the title (boosted) and the content.
    """
    # The demo config wants a data directory; only its mapping is read here.
    mapping = default_demo_config(Path("/nonexistent")).stores[DEMO_STORE].mapping
    return {
        "backend": engine,
        "index": index,
        "description": f"Documentation of A2M and this gateway, packaged as a demo ({engine})",
        "connection": {"hosts": [url]},
        "mapping": mapping.model_dump(mode="json", exclude_defaults=True),
        "search": {"mode": "lexical", "text_fields": ["title^2", "content"]},
    }


QDRANT_DEMO_COLLECTION = "a2m-conformance-demo"
QDRANT_DEMO_INDEXES: dict[str, Any] = {
    "created_at": "datetime",
    "key": "keyword",
    "group": "keyword",
}
"""The payload indexes a server needs for the demo's mapping (order_by, fetch, where)."""


def qdrant_demo_store(server: Any, *, grpc: bool) -> dict[str, Any]:
    """The embedded demo's store, its corpus indexed into the Qdrant server ``server``.

    Indexed by the gateway's own demo indexer (same payloads and vectors as the
    embedded demo) once per session; the store reads the API key from the
    environment, as an operator's config would, over REST or gRPC.
    """
    import asyncio
    import warnings

    from qdrant_client import AsyncQdrantClient

    from gateway.config.engines import QdrantStoreConfig
    from gateway.demo import demo_points, fingerprint
    from tests.support.scifact import server_point

    demo = default_demo_config(Path("/nonexistent")).stores["demo"]
    assert isinstance(demo, QdrantStoreConfig)
    demo = demo.model_copy(update={"index": QDRANT_DEMO_COLLECTION})
    data = demo.model_dump(mode="json", exclude_none=True, exclude={"demo", "connection"})
    connection: dict[str, Any] = {"url": server.url, "api_key": "${A2M_TEST_QDRANT_API_KEY}"}
    if grpc:
        connection.update(prefer_grpc=True, grpc_port=server.grpc_port)
    data["connection"] = connection

    async def index() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
            client = AsyncQdrantClient(
                url=server.url, api_key=server.api_key, timeout=60, check_compatibility=False
            )
        try:
            from qdrant_client import models

            items = chunks()
            sha = fingerprint(items, demo.search.sparse_analyzer)
            if await client.collection_exists(QDRANT_DEMO_COLLECTION):
                await client.delete_collection(QDRANT_DEMO_COLLECTION)
            assert demo.search.sparse_vector is not None
            await client.create_collection(
                QDRANT_DEMO_COLLECTION,
                vectors_config={},
                sparse_vectors_config={
                    demo.search.sparse_vector: models.SparseVectorParams(
                        modifier=models.Modifier.IDF
                    )
                },
            )
            points = [server_point(p) for p in demo_points(demo, items, sha, None)]
            await client.upsert(QDRANT_DEMO_COLLECTION, points=points)
            for field, schema in QDRANT_DEMO_INDEXES.items():
                await client.create_payload_index(QDRANT_DEMO_COLLECTION, field, schema, wait=True)
        finally:
            await client.close()

    if QDRANT_DEMO_COLLECTION not in _QDRANT_LOADED:
        asyncio.run(index())
        _QDRANT_LOADED.add(QDRANT_DEMO_COLLECTION)
    return data


_QDRANT_LOADED: set[str] = set()
