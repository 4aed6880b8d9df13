"""The demo corpus indexed into a qdrant-edge shard, and its cached MiniLM vectors.

:func:`ensure_demo_index` writes the shard unless it holds this corpus already (in a
``:memory:`` store's private temporary directory, or under ``connection.path``);
:func:`demo_points` are the chunks as points, which the tests also write to a Qdrant
server; :func:`embed_chunks` computes the dense vectors once per corpus version.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from connectors.errors import EngineConfigError
from connectors.qdrant.sparse import LexicalSparseEncoder
from gateway.cache import cache_dir, write_atomically
from gateway.config import StoreConfig
from gateway.config.engines import QdrantStoreConfig
from gateway.demo import _FINGERPRINT, MEDIA_TYPE, Chunk, chunks, fingerprint

if TYPE_CHECKING:
    from connectors.base import Connector
    from connectors.qdrant.shard import ShardPoint

log = logging.getLogger("gateway.demo")


async def ensure_demo_index(store: StoreConfig, connector: Connector | None = None) -> int:
    """Fill the demo collection unless it is current.

    ``connection.location: ":memory:"`` (the CLI's demo, ``config/demo.yaml``):
    the shard is written into ``connector``'s private temporary directory (on a
    memory-backed filesystem where there is one), so every gateway process holds
    its own copy and no two contend for a shard's lock. ``connection.path`` (the
    Helm chart's per-pod emptyDir): the shard is written on disk on first start and
    reused after; a shard indexed from another version of the corpus, or left
    half-written, is rebuilt, and it is closed before returning because a shard
    opens in one place at a time and the connector opens it next.

    Payload field names follow the store's mapping (``content``, ``uri``, …
    when unmapped), the sparse vector is ``store.search.sparse_vector``.

    Returns:
        The number of chunks indexed; 0 when the collection was already current.

    Raises:
        EngineConfigError: the store is not an in-process Qdrant store with a sparse
            vector, an in-memory demo has no Qdrant connector to fill, or the path
            holds qdrant-client local mode's files.
        LocalStorageLocked: the shard is locked by another process.
    """
    from connectors.qdrant.connector import QdrantConnector
    from connectors.qdrant.shard import refuse_local_mode, shard_dir

    if (
        not isinstance(store, QdrantStoreConfig)
        or not store.connection.local
        or not store.search.sparse_vector
    ):
        raise EngineConfigError(
            "the demo store needs backend qdrant in this process (connection.path or "
            "location) and search.sparse_vector"
        )
    c = store.connection
    items = chunks()
    dense = store.search.vector_field
    # A store that gains or loses its dense leg (the extra installed or removed) is rebuilt.
    sha = fingerprint(items, store.search.sparse_analyzer) + (f"+{dense}" if dense else "")
    if c.path is None:
        if not isinstance(connector, QdrantConnector):
            raise EngineConfigError("an in-memory demo store is filled through its connector")
        path = connector.local_shard_path()
    else:
        refuse_local_mode(c.path)
        path = shard_dir(c.path, store.index)
    dense_vectors = None
    if dense:
        texts = [indexed_text(chunk) for chunk in items]
        dense_vectors = await embed_chunks(store, texts, sha)
    written = await asyncio.to_thread(_write_if_stale, path, store, items, sha, dense_vectors)
    if written and c.path is not None:
        log.info("demo corpus indexed: %d chunks into %s", written, store.index)
    return written


def indexed_text(c: Chunk) -> str:
    # The title leads each chunk's terms, so a query naming the document finds it; the
    # search terms add a reader's words for what the section's own words name.
    return "\n".join(filter(None, (c.title, c.search_terms, c.content)))


def _write_if_stale(
    path: str, store: QdrantStoreConfig, items: list[Chunk], sha: str, dense_vectors: Any
) -> int:
    """Write the shard at path unless it holds this corpus already; the chunks written.

    Raises:
        LocalStorageLocked: another process holds the shard.
    """
    import qdrant_edge

    from connectors.qdrant.shard import is_shard, locked

    if is_shard(path):
        try:
            shard = qdrant_edge.EdgeShard.load(path)
        except Exception as exc:  # qdrant-edge's own: its WAL lock, or a broken shard
            if "WAL" in str(exc):
                raise locked(os.path.dirname(path)) from exc
            log.info("demo shard unreadable (%s): rebuilt", exc)
        else:
            try:
                if _is_current(shard, len(items), sha):
                    return 0
            finally:
                shard.close()
    shard = index_chunks(path, store, items, sha, dense_vectors)
    shard.close()
    return len(items)


def _is_current(shard: Any, count: int, sha: str) -> bool:
    import qdrant_edge

    if shard.count(qdrant_edge.CountRequest(exact=True)) != count:
        return False
    records, _ = shard.scroll(qdrant_edge.ScrollRequest(limit=1, with_payload=[_FINGERPRINT]))
    return bool(records) and (records[0].payload or {}).get(_FINGERPRINT) == sha


def index_chunks(
    path: str, store: QdrantStoreConfig, items: list[Chunk], sha: str, dense_vectors: Any
) -> Any:
    """A new shard at path holding the chunks (replacing any); the open shard.

    Payload indexes (:func:`payload_indexes`): datetime on created_at, which the
    timeline orders by. The dense vectors are cold
    (read from their file as needed): 55 of them would otherwise take a 32 MiB chunk
    in the process, and as much again on /dev/shm.
    """
    from connectors.qdrant.shard import create_shard, write_points

    sparse_name = store.search.sparse_vector
    assert sparse_name is not None
    dense_name = store.search.vector_field
    shard = create_shard(
        path,
        dense={dense_name: (384, "cosine")} if dense_name else None,
        sparse_idf=[sparse_name],
        indexes=payload_indexes(store),
        cold_vectors=True,
    )
    write_points(shard, demo_points(store, items, sha, dense_vectors))
    return shard


def payload_indexes(store: QdrantStoreConfig) -> dict[str, str]:
    """The demo's payload indexes by field: datetime on created_at, which the timeline's
    order_by needs. Fetch, ``where`` and ``key_prefix`` scan the demo's few dozen points
    instead: a keyword index costs a few MiB of resident memory however small the shard."""
    m = store.mapping
    return {m.created_at or "created_at": "datetime"}


def demo_points(
    store: QdrantStoreConfig, items: list[Chunk], sha: str, dense_vectors: Any
) -> list[ShardPoint]:
    """The chunks as points: payload under the mapping's names, the sparse vector, and
    the dense one when ``dense_vectors`` (one row per chunk) is given."""
    from connectors.base import SparseVector
    from connectors.qdrant.shard import ShardPoint

    sparse_name = store.search.sparse_vector
    assert sparse_name is not None
    dense_name = store.search.vector_field
    m = store.mapping
    names = {
        "content": m.content or "content",
        "uri": m.uri or "uri",
        "media_type": m.media_type or "media_type",
        "key": m.key or "key",
        "group": m.group or "group",
        "created_at": m.created_at or "created_at",
    }
    texts = [indexed_text(c) for c in items]
    analyzer = store.search.sparse_analyzer
    encoder = LexicalSparseEncoder(
        avgdl=LexicalSparseEncoder.average_length(texts, analyzer), analyzer=analyzer
    )
    points = []
    for i, (c, text) in enumerate(zip(items, texts, strict=True), start=1):
        payload: dict[str, Any] = {
            names["content"]: c.content,
            names["uri"]: c.uri,
            names["media_type"]: MEDIA_TYPE,
            names["key"]: c.key,
            names["group"]: c.group,
            names["created_at"]: c.created_at,
            "title": c.title,
            _FINGERPRINT: sha,
        }
        vectors: dict[str, list[float] | SparseVector] = {
            sparse_name: encoder.encode_document(text)
        }
        if dense_name and dense_vectors is not None:
            vectors[dense_name] = [float(x) for x in dense_vectors[i - 1]]
        points.append(ShardPoint(id=i, vectors=vectors, payload=payload))
    return points


async def embed_chunks(store: QdrantStoreConfig, texts: list[str], sha: str) -> Any:
    """The chunks' all-MiniLM-L6-v2 vectors, computed off the event loop, cached per corpus.

    Every process indexes the in-memory demo at start, so the vectors of one corpus
    version are kept in the user's cache directory (``A2M_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/a2m-gateway``): only the first start pays for the model.
    """
    import numpy as np

    from gateway.embedders.minilm import load_encoder

    weights = store.search.embedder.weights
    cache = cache_dir() / f"demo-vectors-{sha}-{weights}.npy"

    def run() -> Any:
        try:
            cached = np.load(cache)
            if cached.shape == (len(texts), 384):
                log.info("demo store: vectors of %d chunks read from %s", len(texts), cache)
                return cached
        except (OSError, ValueError):
            pass
        # Tens of seconds on a small machine, once per corpus version: say so before it starts.
        log.info(
            "demo store: embedding %d chunks with all-MiniLM-L6-v2 (%s weights) on this "
            "machine, once: the vectors are cached in %s for later starts",
            len(texts),
            weights,
            cache,
        )
        started = time.monotonic()
        vectors = load_encoder(weights, 1).encode(texts)
        log.info("demo store: embedded %d chunks in %.1f s", len(texts), time.monotonic() - started)
        encoded = io.BytesIO()
        np.save(encoded, vectors)
        try:
            # Atomic: a concurrent start reads the old file or the whole new one.
            write_atomically(cache, encoded.getvalue())
        except OSError as exc:
            log.info("demo vectors not cached (%s): the next start embeds again", exc)
        return vectors

    return await asyncio.to_thread(run)
