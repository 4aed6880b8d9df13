"""SciFact (BEIR layout) for the tests: read the shared copy, pick a subset, load Qdrant.

Reusable by any engine's tests and by the benchmarks: :func:`load_scifact`
reads corpus, train queries, qrels and the all-MiniLM-L6-v2 vectors;
:func:`subset` picks the judged documents of the first queries plus others;
:func:`documents` gives each chosen document the payload the tests map
(content, title, key, group, created_at, year, judged); :func:`load_qdrant`
writes them to a qdrant-edge shard (what a ``connection.path`` store reads) or to a
Qdrant server.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from connectors.qdrant.sparse import LexicalSparseEncoder

if TYPE_CHECKING:
    from connectors.qdrant.shard import ShardPoint

DENSE = "dense"
SPARSE = "text-sparse"
COLLECTION = "scifact"
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SciFact:
    """The collection as read from disk. Vectors are unit length (cosine = dot)."""

    titles: dict[str, str]
    texts: dict[str, str]
    corpus_ids: list[str]
    """Document ids in the row order of corpus_vectors."""
    queries: dict[str, str]
    query_ids: list[str]
    """Train query ids in the row order of query_vectors."""
    qrels: dict[str, set[str]]
    """query id -> ids of the relevant documents."""
    corpus_vectors: npt.NDArray[np.float32]
    query_vectors: npt.NDArray[np.float32]
    _doc_row: dict[str, int] = field(default_factory=dict, repr=False)
    _query_row: dict[str, int] = field(default_factory=dict, repr=False)

    def doc_vector(self, doc_id: str) -> list[float]:
        return [float(x) for x in self.corpus_vectors[self._doc_row[doc_id]]]

    def query_vector(self, query_id: str) -> list[float]:
        return [float(x) for x in self.query_vectors[self._query_row[query_id]]]

    def content(self, doc_id: str) -> str:
        """What the vectors were computed from: title, a space, the abstract."""
        return f"{self.titles[doc_id]} {self.texts[doc_id]}"


def load_scifact(root: Path) -> SciFact:
    """Read the BEIR files and the MiniLM vectors under root."""
    titles: dict[str, str] = {}
    texts: dict[str, str] = {}
    with (root / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            titles[doc["_id"]] = doc.get("title", "")
            texts[doc["_id"]] = doc.get("text", "")
    queries: dict[str, str] = {}
    with (root / "queries-train.jsonl").open(encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    qrels: dict[str, set[str]] = {}
    with (root / "qrels" / "train.tsv").open(encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            qid, did, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, set()).add(did)
    corpus_ids = (root / "corpus-ids.txt").read_text(encoding="utf-8").split()
    query_ids = (root / "queries-train-ids.txt").read_text(encoding="utf-8").split()
    return SciFact(
        titles=titles,
        texts=texts,
        corpus_ids=corpus_ids,
        queries=queries,
        query_ids=query_ids,
        qrels=qrels,
        corpus_vectors=np.load(root / "corpus-minilm.npy", mmap_mode="r"),
        query_vectors=np.load(root / "queries-train-minilm.npy", mmap_mode="r"),
        _doc_row={d: i for i, d in enumerate(corpus_ids)},
        _query_row={q: i for i, q in enumerate(query_ids)},
    )


def subset(sf: SciFact, n_queries: int = 100, n_others: int = 1000) -> tuple[list[str], list[str]]:
    """The first n_queries judged train queries, and their relevant docs plus n_others more.

    The others are the first unjudged documents in corpus order: deterministic,
    and unrelated to the queries, so they act as distractors.
    """
    qids = [q for q in sf.query_ids if q in sf.qrels][:n_queries]
    relevant = sorted({d for q in qids for d in sf.qrels[q]}, key=sf._doc_row.__getitem__)
    taken = set(relevant)
    others = [d for d in sf.corpus_ids if d not in taken][:n_others]
    return qids, relevant + others


def created_at(rank: int) -> str:
    """A distinct, deterministic ISO-8601 UTC timestamp for the rank-th document."""
    return (EPOCH + timedelta(minutes=rank)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def documents(sf: SciFact, doc_ids: Sequence[str]) -> list[dict[str, Any]]:
    """One payload per document, in doc_ids order.

    created_at follows a hash of the id, not the id itself, so creation order
    and id order differ (tests can tell the two apart).
    """
    judged = {d for rel in sf.qrels.values() for d in rel}
    by_hash = sorted(doc_ids, key=lambda d: (zlib.crc32(d.encode()), d))
    rank = {d: i for i, d in enumerate(by_hash)}
    return [
        {
            "id": int(d),
            "content": sf.content(d),
            "title": sf.titles[d],
            "key": f"scifact/{d}",
            "group": f"g{int(d) % 7}",
            "created_at": created_at(rank[d]),
            "year": 2000 + int(d) % 20,
            "judged": d in judged,
        }
        for d in doc_ids
    ]


def load_qdrant(
    path: Path | str,
    sf: SciFact,
    doc_ids: Sequence[str],
    *,
    collection: str = COLLECTION,
    dense_name: str | None = DENSE,
    sparse_name: str | None = SPARSE,
    batch: int = 256,
    server: dict[str, Any] | None = None,
) -> LexicalSparseEncoder:
    """Create ``collection`` as a qdrant-edge shard under path and index the documents.

    The shard is ``<path>/<collection>``, what a ``connection.path`` store reads.
    Dense vectors (cosine) come from the shared MiniLM file under ``dense_name``
    (None: the collection's unnamed default vector); sparse vectors from
    :class:`LexicalSparseEncoder` under ``sparse_name`` with the IDF modifier; the
    payload indexes of :data:`SERVER_INDEXES`. With ``server`` (qdrant-client's keyword
    arguments: url, api_key) the collection is (re)created on that Qdrant server
    instead; ``path`` is then unused. The shard is closed before returning, releasing
    its lock. Returns the encoder, whose ``avgdl`` was fitted to these documents.
    """
    return write_documents(
        path,
        sf,
        documents(sf, doc_ids),
        collection=collection,
        dense_name=dense_name,
        sparse_name=sparse_name,
        batch=batch,
        server=server,
    )


def write_documents(
    path: Path | str,
    sf: SciFact,
    docs: list[dict[str, Any]],
    *,
    collection: str = COLLECTION,
    dense_name: str | None = DENSE,
    sparse_name: str | None = SPARSE,
    batch: int = 256,
    server: dict[str, Any] | None = None,
) -> LexicalSparseEncoder:
    """:func:`load_qdrant` of payloads made elsewhere (:func:`documents`' shape: an
    ``id`` that is a SciFact id, whose MiniLM vector is the point's, and a ``content``)."""
    encoder = LexicalSparseEncoder(
        avgdl=LexicalSparseEncoder.average_length(d["content"] for d in docs)
    )
    points = _points(sf, docs, encoder, dense_name or "", sparse_name)
    if server is not None:
        _load_server(server, sf, collection, dense_name, sparse_name, points, batch)
        return encoder
    from connectors.qdrant.shard import create_shard, shard_dir, write_points

    shard = create_shard(
        shard_dir(str(path), collection),
        dense={dense_name or "": (sf.corpus_vectors.shape[1], "cosine")},
        sparse_idf=[sparse_name] if sparse_name else [],
        indexes={f: str(kind) for f, kind in SERVER_INDEXES.items()},
    )
    try:
        write_points(shard, points, batch)
    finally:
        shard.close()
    return encoder


def _points(
    sf: SciFact,
    docs: list[dict[str, Any]],
    encoder: LexicalSparseEncoder,
    dense_name: str,
    sparse_name: str | None,
) -> list[ShardPoint]:
    from connectors.qdrant.shard import ShardPoint

    out = []
    for d in docs:
        vectors: dict[str, Any] = {dense_name: sf.doc_vector(str(d["id"]))}
        if sparse_name:
            vectors[sparse_name] = encoder.encode_document(d["content"])
        payload = {k: v for k, v in d.items() if k != "id"}
        out.append(ShardPoint(id=d["id"], vectors=vectors, payload=payload))
    return out


def _load_server(
    server: dict[str, Any],
    sf: SciFact,
    collection: str,
    dense_name: str | None,
    sparse_name: str | None,
    points: list[ShardPoint],
    batch: int,
) -> None:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(**server)
    try:
        if client.collection_exists(collection):
            client.delete_collection(collection)
        params = models.VectorParams(
            size=sf.corpus_vectors.shape[1], distance=models.Distance.COSINE
        )
        vectors: Any = params if dense_name is None else {dense_name: params}
        sparse = (
            {sparse_name: models.SparseVectorParams(modifier=models.Modifier.IDF)}
            if sparse_name
            else None
        )
        client.create_collection(collection, vectors_config=vectors, sparse_vectors_config=sparse)
        for start in range(0, len(points), batch):
            client.upsert(
                collection,
                points=[server_point(p) for p in points[start : start + batch]],
            )
        for field, schema in SERVER_INDEXES.items():
            client.create_payload_index(collection, field, schema, wait=True)
    finally:
        client.close()


def server_point(p: ShardPoint) -> Any:
    """A point to write as qdrant-client's ``PointStruct``."""
    from qdrant_client import models

    from connectors.base import SparseVector

    vectors: dict[str, Any] = {}
    for name, v in p.vectors.items():
        if isinstance(v, SparseVector):
            vectors[name] = models.SparseVector(indices=list(v.indices), values=list(v.values))
        else:
            vectors[name] = [float(x) for x in v]
    return models.PointStruct(id=p.id, vector=vectors, payload=p.payload)


SERVER_INDEXES: dict[str, Any] = {
    "created_at": "datetime",
    "key": "keyword",
    "group": "keyword",
    "year": "integer",
    "judged": "bool",
}
"""The payload indexes a server collection gets: what the test stores filter and order by."""


def _chunks(items: Sequence[dict[str, Any]], n: int) -> Iterable[Sequence[dict[str, Any]]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
