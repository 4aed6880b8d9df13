"""Load SciFact into an Elasticsearch or OpenSearch index through the client's bulk API.

The collection is read by :mod:`tests.support.scifact`; this module only shapes
and writes the documents.

One index per engine, filled once per test session (idempotent: an index that
already holds every document with the expected mapping is left alone).

Fields of each document:

- ``title``, ``text``: ``text`` with the ``standard`` analyzer by default. It
  lives in the engines' core, so it exists on every distribution (the
  Elasticsearch integ-test distribution lacks the analysis-common module that
  provides ``english``), and both engines then tokenise identically. The
  benchmark asks for ``english`` on OpenSearch (``analyzer=``), as BEIR's
  BM25 baseline did.
- ``doc_id`` (keyword): the SciFact id; ``key`` (keyword): ``scifact/<id>``.
- ``group`` (keyword): ``g<id mod 997>``, about five documents a group, for collapse.
- ``created_at`` (date): synthetic and deterministic, one minute apart per
  three documents in corpus order, so runs of equal timestamps exercise the
  ordered reads' tie-break.
- ``acl`` (keyword): ``even``/``odd`` by id parity; reserved for the security
  work and deliberately absent from the stores' mappings (it must never leak).
- ``embedding``: the 384-d all-MiniLM-L6-v2 vector from ``corpus-minilm.npy``,
  cosine (``dense_vector`` on Elasticsearch; ``knn_vector`` HNSW on the Lucene
  engine on OpenSearch, ``index.knn: true``).

Two shards, so the tie-break and kNN are exercised across shards; no replicas
(one node).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np

from tests.support.scifact import SciFact

Engine = Literal["elasticsearch", "opensearch"]

DIMENSIONS = 384
SHARDS = 2
CHUNK = 250
THREADS = 2
"""Bulk requests in flight: with two, the node indexes (HNSW, quantisation) on both
cores while the next chunk travels; measured 2.7 s (ES) / 3.9 s (OS) against
8.7 s / 11.0 s for sequential 500-document chunks."""
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
ANALYZER = "standard"


@dataclass(frozen=True, slots=True)
class LoadResult:
    index: str
    count: int
    loaded: bool
    """False when the index already held the corpus and was left alone."""
    seconds: float


def created_at(position: int) -> str:
    """The synthetic timestamp of the document at ``position`` in corpus order."""
    when = EPOCH + timedelta(minutes=position // 3)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def group_of(doc_id: str) -> str:
    return f"g{int(doc_id) % 997:03d}"


def acl_of(doc_id: str) -> str:
    return "even" if int(doc_id) % 2 == 0 else "odd"


def source_of(sf: SciFact, position: int) -> dict[str, Any]:
    """The document at ``position`` of ``corpus-ids.txt`` (the row of its vector)."""
    doc_id = sf.corpus_ids[position]
    return {
        "doc_id": doc_id,
        "key": f"scifact/{doc_id}",
        "title": sf.titles[doc_id],
        "text": sf.texts[doc_id],
        "group": group_of(doc_id),
        "created_at": created_at(position),
        "acl": acl_of(doc_id),
        "embedding": sf.corpus_vectors[position].astype(np.float32).tolist(),
    }


# ---- index definitions


def _properties(vector: dict[str, Any], analyzer: str) -> dict[str, Any]:
    return {
        "doc_id": {"type": "keyword"},
        "key": {"type": "keyword"},
        "title": {"type": "text", "analyzer": analyzer},
        "text": {"type": "text", "analyzer": analyzer},
        "group": {"type": "keyword"},
        "created_at": {"type": "date"},
        "acl": {"type": "keyword"},
        "embedding": vector,
    }


def index_body(engine: Engine, analyzer: str = ANALYZER) -> dict[str, Any]:
    """Settings and mappings of the SciFact index for ``engine``."""
    settings: dict[str, Any] = {
        "number_of_shards": SHARDS,
        "number_of_replicas": 0,
        # Refreshed once after the load instead of every second during it.
        "refresh_interval": "-1",
    }
    if engine == "elasticsearch":
        vector = {
            "type": "dense_vector",
            "dims": DIMENSIONS,
            "index": True,
            "similarity": "cosine",
        }
    else:
        settings["knn"] = True
        vector = {
            "type": "knn_vector",
            "dimension": DIMENSIONS,
            # The Maven plugin ZIP has no native faiss/nmslib libraries: Lucene only.
            "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
        }
    return {
        "settings": {"index": settings},
        "mappings": {"dynamic": "strict", "properties": _properties(vector, analyzer)},
    }


# ---- loading


def lucene_client(engine: str, url: str, *, timeout: float = 120) -> Any:
    """The official synchronous client of `engine` at `url`, for loading and reading indices."""
    if engine == "elasticsearch":
        from elasticsearch import Elasticsearch

        return Elasticsearch(url, request_timeout=timeout)
    from opensearchpy import OpenSearch

    return OpenSearch(hosts=[url], timeout=timeout)


def recreate_index(client: Any, index: str, body: dict[str, Any]) -> None:
    """``index`` created anew with ``body`` (settings, mappings), dropped first if it exists."""
    if client.indices.exists(index=index):
        client.indices.delete(index=index)
    client.indices.create(index=index, body=body)


def _actions(index: str, sf: SciFact) -> Iterator[dict[str, Any]]:
    if sf.corpus_vectors.shape != (len(sf.corpus_ids), DIMENSIONS):
        raise ValueError(f"corpus vectors are {sf.corpus_vectors.shape}, expected 384 wide")
    for position, doc_id in enumerate(sf.corpus_ids):
        yield {
            "_op_type": "index",
            "_index": index,
            "_id": doc_id,
            "_source": source_of(sf, position),
        }


def _ready(client: Any, index: str, engine: Engine, expected: int, analyzer: str) -> bool:
    if not client.indices.exists(index=index):
        return False
    mapping = client.indices.get_mapping(index=index)
    props = next(iter(dict(mapping).values()))["mappings"].get("properties", {})
    wanted = index_body(engine, analyzer)["mappings"]["properties"]
    if set(props) != set(wanted):
        return False
    if props.get("text", {}).get("analyzer", ANALYZER) != analyzer:
        return False  # the engines omit the default analyzer from the mapping they return
    count = client.count(index=index)["count"]
    return int(count) == expected


def load_index(
    engine: Engine, url: str, index: str, sf: SciFact, *, analyzer: str = ANALYZER
) -> LoadResult:
    """Create and fill ``index`` with SciFact unless it already holds the whole corpus.

    A partial or differently-mapped index of that name is dropped and rebuilt.

    Raises:
        RuntimeError: the bulk load reported errors or the count is wrong.
    """
    started = time.monotonic()
    expected = len(sf.corpus_ids)
    client = lucene_client(engine, url)
    try:
        if _ready(client, index, engine, expected, analyzer):
            return LoadResult(index, expected, False, time.monotonic() - started)
        recreate_index(client, index, index_body(engine, analyzer))
        parallel_bulk: Callable[..., Iterable[tuple[bool, Any]]]
        if engine == "elasticsearch":
            from elasticsearch.helpers import parallel_bulk
        else:
            from opensearchpy.helpers import parallel_bulk
        failed = [
            info
            for ok, info in parallel_bulk(
                client,
                _actions(index, sf),
                thread_count=THREADS,
                chunk_size=CHUNK,
                raise_on_error=False,
            )
            if not ok
        ]
        if failed:
            raise RuntimeError(
                f"bulk load of {index}: {len(failed)} failed, first {failed[0]!r:.500}"
            )
        client.indices.put_settings(index=index, body={"index": {"refresh_interval": None}})
        client.indices.refresh(index=index)
        count = int(client.count(index=index)["count"])
        if count != expected:
            raise RuntimeError(f"{index} holds {count} documents, expected {expected}")
        return LoadResult(index, count, True, time.monotonic() - started)
    finally:
        client.close()
